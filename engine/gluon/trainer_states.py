"""Trainer checkpoints: optimizer states of every context + counts + schedule, no pickle.

Written and read by :meth:`Trainer.save_states` / :meth:`Trainer.load_states` through the
Trainer's public surface only (``parameters``, ``optimizer``, ``state_holders()``).

The file is an ``.npz`` archive: one array per state tensor and a ``__meta__`` entry
holding UTF-8 JSON (format, the parameters' shapes/dtypes, the optimizer's plain-data state
with its scheduler and live-LR change, and each context's state structure). Loading parses
and checks everything before touching the trainer, so a corrupt or mismatched file leaves
it unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy

from ..ndarray import NDArray
from ..optimizer.updater import copy_state_into, pack_state, state_shapes, unpack_state
from ..serialization import SerializationError, load_npz, npz_bytes

FORMAT = "rudder.trainer_states"
VERSION = 1


def save(trainer: Any, fname: Any) -> None:
    """Write ``trainer``'s optimizer state to a path or a binary file object."""
    optimizer = trainer.optimizer
    arrays: dict[str, numpy.ndarray] = {}
    contexts = []
    for c, (updater, _) in enumerate(trainer.state_holders()):
        contexts.append({str(i): pack_state(s, f"c{c}.s{i}", arrays)
                         for i, s in sorted(updater.states.items(), key=lambda kv: str(kv[0]))})
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "params": [_describe(p) for p in trainer.parameters],
        "optimizer": optimizer.state_dict(),
        "learning_rate": optimizer.learning_rate,
        "contexts": contexts,
    }
    # Bytes first, then one write: a failure while packing leaves the target untouched.
    blob = npz_bytes(arrays, meta)
    if hasattr(fname, "write"):
        fname.write(blob)
    else:
        with open(fname, "wb") as handle:
            handle.write(blob)


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
        arrays, meta = load_npz(blob)
    except SerializationError as err:
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
    optimizer = trainer.optimizer
    params = trainer.parameters
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
    holders = trainer.state_holders()
    updaters = [updater for updater, _ in holders]
    contexts = meta["contexts"]
    if not contexts:
        raise ValueError("trainer states file holds no context")
    restored = []
    for c in range(len(updaters)):
        source = contexts[c] if len(contexts) == len(updaters) else contexts[0]
        like = NDArray(numpy.zeros(()), holders[c][1])
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


def _check_layout(optimizer: Any, param: Any, index: int, state: Any, like: Any) -> None:
    """The loaded state must have the layout this optimizer creates for the parameter."""
    if param.shape is None or any(int(d) <= 0 for d in param.shape):
        return  # shape unknown yet (deferred init): checked when the state is first used
    probe = NDArray(like.context.xp.zeros(param.shape, dtype=param.dtype), like.context)
    expected = state_shapes(optimizer.create_state_multi_precision(index, probe))
    got = state_shapes(state)
    if expected != got:
        raise ValueError(f"optimizer state of parameter {index} ({param.name}) has layout "
                         f"{got}, expected {expected}: saved by a different optimizer setup?")
