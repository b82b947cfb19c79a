"""Trainer checkpoints: optimizer states of every context + counts + schedule, no pickle.

The file is an ``.npz`` archive: one array per state tensor and a ``__meta__`` entry
holding UTF-8 JSON (format, the parameters' shapes/dtypes, the optimizer's plain-data state
with its scheduler and live-LR change, and each context's state structure). Loading parses
and checks everything before touching the trainer, so a corrupt or mismatched file leaves
it unchanged.
"""

from __future__ import annotations

import io
import json
from typing import Any

import numpy

from .updater import META_KEY, copy_state_into, pack_state, state_shapes, unpack_state

FORMAT = "rudder.trainer_states"
VERSION = 1


def save(trainer: Any, fname: Any) -> None:
    """Write ``trainer``'s optimizer state to a path or a binary file object."""
    optimizer = trainer._optimizer
    arrays: dict[str, numpy.ndarray] = {}
    contexts = []
    for c, updater in enumerate(trainer._state_updaters()):
        contexts.append({str(i): pack_state(s, f"c{c}.s{i}", arrays)
                         for i, s in sorted(updater.states.items(), key=lambda kv: str(kv[0]))})
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "params": [_describe(p) for p in trainer._params],
        "optimizer": optimizer.state_dict(),
        "learning_rate": optimizer.learning_rate,
        "contexts": contexts,
    }
    arrays[META_KEY] = numpy.frombuffer(json.dumps(meta).encode(), dtype=numpy.uint8)
    buffer = io.BytesIO()
    numpy.savez(buffer, **arrays)
    if hasattr(fname, "write"):
        fname.write(buffer.getvalue())
    else:
        with open(fname, "wb") as handle:
            handle.write(buffer.getvalue())


def _describe(param: Any) -> dict[str, Any]:
    shape = None if param.shape is None else [int(s) for s in param.shape]
    return {"name": param.name, "shape": shape, "dtype": numpy.dtype(param.dtype).name}


def _read(fname: Any) -> tuple[dict[str, Any], dict[str, numpy.ndarray]]:
    try:
        if hasattr(fname, "read"):
            blob = fname.read()
        else:
            with open(fname, "rb") as handle:
                blob = handle.read()
    except OSError as err:
        raise ValueError(f"cannot read trainer states from {fname!r}: {err}") from err
    try:
        with numpy.load(io.BytesIO(blob), allow_pickle=False) as archive:
            arrays = {k: archive[k] for k in archive.files}
        meta = json.loads(arrays.pop(META_KEY).tobytes().decode())
    except Exception as err:  # noqa: BLE001 - any decoding problem means a corrupt file
        raise ValueError(f"not a Rudder trainer states file (corrupt or wrong format): "
                         f"{err}") from err
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError("not a Rudder trainer states file (missing format marker)")
    if meta.get("version") != VERSION:
        raise ValueError(f"unsupported trainer states version {meta.get('version')!r}")
    return meta, arrays


def load(trainer: Any, fname: Any) -> None:
    """Check ``fname`` against ``trainer`` completely, then restore it."""
    meta, arrays = _read(fname)
    optimizer = trainer._optimizer
    params = trainer._params
    saved = meta["params"]
    if len(saved) != len(params):
        raise ValueError(f"trainer states file has {len(saved)} parameters, this trainer has "
                         f"{len(params)}")
    for i, (info, param) in enumerate(zip(saved, params, strict=True)):
        here = _describe(param)
        if here["shape"] is not None and info["shape"] is not None and \
                here["shape"] != info["shape"]:
            raise ValueError(f"parameter {i} ({param.name}) has shape {tuple(here['shape'])} "
                             f"but the file has {tuple(info['shape'])}")
        if here["dtype"] != info["dtype"]:
            raise ValueError(f"parameter {i} ({param.name}) has dtype {here['dtype']} but the "
                             f"file has {info['dtype']}")
    optimizer.check_state_dict(meta["optimizer"])
    updaters = trainer._state_updaters()
    contexts = meta["contexts"]
    if not contexts:
        raise ValueError("trainer states file holds no context")
    restored = []
    for c in range(len(updaters)):
        source = contexts[c] if len(contexts) == len(updaters) else contexts[0]
        like = _context_array(trainer, c, updaters)
        states = {}
        for key, structure in source.items():
            index = int(key)
            if not 0 <= index < len(params):
                raise ValueError(f"state for parameter {index}, which this trainer lacks")
            try:
                state = unpack_state(structure, arrays, like)
            except KeyError as err:
                raise ValueError(f"trainer states file lacks array {err}") from err
            _check_layout(optimizer, params[index], index, state, like)
            states[index] = state
        restored.append(states)
    before = optimizer.state_dict()
    try:
        optimizer.load_state_dict(meta["optimizer"])
    except Exception:
        optimizer.load_state_dict(before)
        raise
    for updater, states in zip(updaters, restored, strict=True):
        for index in list(updater.states):
            if index not in states:
                del updater.states[index]
        for index, state in states.items():
            current = updater.states.get(index)
            try:
                updater.states[index] = copy_state_into(current, state)
            except ValueError:
                updater.states[index] = state
            updater.states_synced[index] = True


def _context_array(trainer: Any, c: int, updaters: list[Any]) -> Any:
    from ..context import cpu
    from ..ndarray import NDArray

    if trainer._kvstore is not None and trainer._update_on_kvstore:
        store = getattr(trainer._kvstore, "_store", {})
        first = next(iter(store.values()), None)
        ctx = first.context if first is not None else trainer._contexts[0]
    else:
        ctx = trainer._contexts[c] if trainer._contexts else cpu()
    return NDArray(numpy.zeros(()), ctx)


def _check_layout(optimizer: Any, param: Any, index: int, state: Any, like: Any) -> None:
    """The loaded state must have the layout this optimizer creates for the parameter."""
    if param._data is None:
        return  # shape unknown yet (deferred init): checked when the state is first used
    from ..ndarray import NDArray

    probe = NDArray(like.context.xp.zeros(param.shape, dtype=param.dtype), like.context)
    expected = state_shapes(optimizer.create_state_multi_precision(index, probe))
    got = state_shapes(state)
    if expected != got:
        raise ValueError(f"optimizer state of parameter {index} ({param.name}) has layout "
                         f"{got}, expected {expected}: saved by a different optimizer setup?")
