"""``Updater``: applies an optimizer to (index, grad, weight) and keeps per-index states.

States are saved without pickle: arrays go into an ``.npz`` archive and the structure
(which index holds None, an array or a tuple of them) plus the optimizer's plain-data state
into a JSON entry of the same archive.

>>> import engine as mx
>>> upd = mx.optimizer.get_updater(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9))
>>> w = mx.nd.ones((2,)); upd(0, mx.nd.ones((2,)), w)
>>> blob = upd.get_states(); upd.set_states(blob)
"""

from __future__ import annotations

from typing import Any

import numpy

from ..ndarray import NDArray
from ..serialization import SerializationError, load_npz, npz_bytes
from .optimizer import Optimizer


def pack_state(state: Any, prefix: str, arrays: dict[str, numpy.ndarray]) -> Any:
    """JSON structure for ``state``; its arrays are added to ``arrays`` under ``prefix``."""
    if state is None:
        return None
    if isinstance(state, NDArray):
        arrays[prefix] = state.asnumpy()
        return {"array": prefix}
    if isinstance(state, (tuple, list)):
        return [pack_state(s, f"{prefix}.{k}", arrays) for k, s in enumerate(state)]
    raise TypeError(f"cannot save optimizer state of type {type(state).__name__}")


def unpack_state(structure: Any, arrays: Any, like: NDArray) -> Any:
    """The inverse of :func:`pack_state`: NDArrays on ``like``'s context."""
    from ..ndarray import array

    if structure is None:
        return None
    if isinstance(structure, dict):
        data = arrays[structure["array"]]
        return array(data, ctx=like.context, dtype=data.dtype)
    if isinstance(structure, list):
        return tuple(unpack_state(s, arrays, like) for s in structure)
    raise ValueError(f"malformed optimizer state structure {structure!r}")


def copy_state_into(target: Any, source: Any) -> Any:
    """Write ``source`` into ``target`` in place where shapes allow (keeps views valid)."""
    if isinstance(target, NDArray) and isinstance(source, NDArray):
        if target.shape != source.shape:
            raise ValueError(f"optimizer state shape {source.shape} does not match {target.shape}")
        target.raw[...] = source.as_in_context(target.context).raw.astype(
            target.raw.dtype, copy=False)
        return target
    if isinstance(target, tuple) and isinstance(source, tuple) and len(target) == len(source):
        return tuple(copy_state_into(t, s) for t, s in zip(target, source, strict=True))
    if target is None and source is None:
        return None
    raise ValueError("optimizer state layout does not match this optimizer")


def state_shapes(state: Any) -> Any:
    if state is None:
        return None
    if isinstance(state, NDArray):
        return list(state.shape)
    return [state_shapes(s) for s in state]


class Updater:
    """Runs ``optimizer.update_multi_precision`` with lazily created per-index states."""

    def __init__(self, optimizer: Optimizer) -> None:
        self.optimizer = optimizer
        self.states: dict[Any, Any] = {}
        self.states_synced: dict[Any, bool] = {}
        self.aggregate_updates = False

    def __call__(self, index: Any, grad: Any, weight: Any) -> None:
        if not isinstance(index, (list, tuple)):
            index, grad, weight = [index], [grad], [weight]
        for i, g, w in zip(index, grad, weight, strict=True):
            self.optimizer._set_current_context(w.context.device_id)
            if i not in self.states:
                self.states[i] = self.optimizer.create_state_multi_precision(i, w)
                self.states_synced[i] = True
            elif not self.states_synced[i]:
                self.states[i] = _to_context(self.states[i], w.context)
                self.states_synced[i] = True
            self.optimizer.update_multi_precision(i, w, g, self.states[i])

    def sync_state_context(self, state: Any, context: Any) -> Any:
        return _to_context(state, context)

    def get_states(self, dump_optimizer: bool = False) -> bytes:
        """The states (and, with ``dump_optimizer``, the optimizer's state) as npz bytes."""
        arrays: dict[str, numpy.ndarray] = {}
        structure = {str(i): pack_state(s, f"s{i}", arrays) for i, s in self.states.items()}
        meta: dict[str, Any] = {"states": structure}
        if dump_optimizer:
            meta["optimizer"] = self.optimizer.state_dict()
        return npz_bytes(arrays, meta)

    def set_states(self, states: bytes) -> None:
        """Load what :meth:`get_states` returned; states move to each weight's context lazily."""
        try:
            arrays, meta = load_npz(states)
        except SerializationError as err:
            raise ValueError(f"not an optimizer state blob: {err}") from err
        if not isinstance(meta, dict) or not isinstance(meta.get("states"), dict):
            raise ValueError("not an optimizer state blob: no state table")
        if "optimizer" in meta:
            self.optimizer.check_state_dict(meta["optimizer"])
        from ..context import cpu

        like = NDArray(numpy.zeros(()), cpu())
        loaded = {_key(i): unpack_state(s, arrays, like) for i, s in meta["states"].items()}
        if "optimizer" in meta:
            self.optimizer.load_state_dict(meta["optimizer"])
        self.states = loaded
        self.states_synced = dict.fromkeys(self.states, False)


def _key(text: str) -> Any:
    return int(text) if text.lstrip("-").isdigit() else text


def _to_context(state: Any, context: Any) -> Any:
    if isinstance(state, NDArray):
        return state.as_in_context(context)
    if isinstance(state, (tuple, list)):
        return tuple(_to_context(s, context) for s in state)
    return state


def get_updater(optimizer: Optimizer) -> Updater:
    """An :class:`Updater` for ``optimizer`` (``mxnet.optimizer.get_updater``)."""
    return Updater(optimizer)
