"""The single-machine store: values from several devices summed on one merge device.

'local' merges on the cpu, 'device' (and 'nccl') on the first pushing value's device, as in
MXNet. Only dense arrays exist in the engine, so ``row_sparse_pull`` pulls whole arrays of
a dense store and refuses anything else.
"""

from __future__ import annotations

from typing import Any

import numpy

from ..context import cpu
from ..ndarray import NDArray
from .base import KVStoreBase
from .compression import make_compression


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _group(key: Any, value: Any) -> list[tuple[Any, list[NDArray]]]:
    """Pair keys with their per-device value lists (one key, or a list of keys)."""
    if isinstance(key, (list, tuple)):
        values = list(value) if value is not None else [None] * len(key)
        if len(values) != len(key):
            raise ValueError(f"{len(key)} keys but {len(values)} values")
        return [(k, _as_list(v)) for k, v in zip(key, values, strict=True)]
    return [(key, _as_list(value))]


class KVStore(KVStoreBase):
    """``mxnet.kvstore.KVStore`` for 'local' / 'device' on one machine.

    >>> import engine as mx
    >>> kv = mx.kv.create("device")
    >>> kv.init("w", mx.nd.zeros((2,)))
    >>> kv.set_optimizer(mx.optimizer.SGD(learning_rate=1.0))
    >>> kv.push("w", [mx.nd.ones((2,)), mx.nd.ones((2,))])
    >>> out = mx.nd.zeros((2,)); kv.pull("w", out=out); out.asnumpy().tolist()
    [-2.0, -2.0]
    """

    def __init__(self, kv_type: str = "local") -> None:
        self._type = kv_type
        self._store: dict[Any, NDArray] = {}
        self._key_kind: type | None = None
        self._updater: Any = None
        self._optimizer: Any = None
        self._compression: Any = None

    @property
    def type(self) -> str:
        return self._type

    def is_capable(self, capability: str) -> bool:
        if capability.lower() == KVStoreBase.OPTIMIZER:
            return True
        raise ValueError(f"Unknown capability: {capability}")

    # ----------------------------------------------------------------- keys/values
    def _check_key(self, key: Any) -> None:
        kind = str if isinstance(key, str) else int
        if not isinstance(key, (str, int, numpy.integer)):
            raise TypeError(f"kvstore keys must be int or str, got {type(key).__name__}")
        if self._key_kind is None:
            self._key_kind = kind
        elif self._key_kind is not kind:
            raise ValueError("cannot mix int and str keys in one kvstore")

    def _stored(self, key: Any) -> NDArray:
        try:
            return self._store[key]
        except KeyError:
            raise ValueError(f"key {key!r} has not been initialized in the kvstore") from None

    def init(self, key: Any, value: Any) -> None:
        """Store the initial value of each key (the first value of a device list)."""
        for k, values in _group(key, value):
            self._check_key(k)
            if k in self._store:
                raise ValueError(f"duplicate init of key {k}")
            first = values[0]
            ctx = cpu() if self._type == "local" else first.context
            self._store[k] = first.copyto(ctx)

    def push(self, key: Any, value: Any, priority: int = 0) -> None:
        """Sum the per-device values; run the updater on the stored value, or overwrite it."""
        for k, values in _group(key, value):
            stored = self._stored(k)
            merged = self._merge(k, values, stored)
            if self._updater is not None:
                self._updater(k, merged, stored)
            else:
                stored.raw[...] = merged.raw

    def _merge(self, key: Any, values: list[NDArray], stored: NDArray) -> NDArray:
        ctx = stored.context
        total = None
        for device, v in enumerate(values):
            if v.shape != stored.shape:
                raise ValueError(f"pushed shape {v.shape} does not match key {key!r}'s "
                                 f"shape {stored.shape}")
            raw = v.as_in_context(ctx).raw if v.context != ctx else v.raw
            if self._compression is not None:
                raw = self._compression.compress(key, device, raw)
            total = raw.copy() if total is None else _add(total, raw)
        return NDArray(total, ctx)

    def pull(self, key: Any, out: Any = None, priority: int = 0,
             ignore_sparse: bool = True) -> None:
        """Copy each key's stored value into every array of ``out``."""
        if out is None:
            raise ValueError("pull needs out=")
        for k, outs in _group(key, out):
            stored = self._stored(k)
            for o in outs:
                stored.copyto(o)

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        self.push(key, value, priority)
        self.pull(key, value if out is None else out, priority)

    def broadcast(self, key: Any, value: Any, out: Any, priority: int = 0) -> None:
        self.init(key, value)
        self.pull(key, out, priority)

    def row_sparse_pull(self, key: Any, out: Any = None, priority: int = 0,
                        row_ids: Any = None) -> None:
        """Pull only rows ``row_ids`` of each key (the engine is dense: other rows become 0)."""
        if row_ids is None:
            raise ValueError("row_sparse_pull needs row_ids")
        groups = _group(key, out)
        ids_per_key = list(row_ids) if isinstance(key, (list, tuple)) else [row_ids]
        for (k, outs), ids in zip(groups, ids_per_key, strict=True):
            stored = self._stored(k)
            ids_list = _as_list(ids)
            if len(ids_list) == 1:
                ids_list = ids_list * len(outs)
            for o, rows in zip(outs, ids_list, strict=True):
                raw_rows = rows.asnumpy() if isinstance(rows, NDArray) else rows
                idx = numpy.asarray(raw_rows, dtype=numpy.int64).ravel()
                full = stored.copyto(o.context).raw
                o.raw[...] = 0
                o.raw[idx] = full[idx]

    # ------------------------------------------------------------------- optimizer
    def set_optimizer(self, optimizer: Any) -> None:
        """Run ``optimizer`` on pushes; the updater shares the same optimizer object."""
        from ..optimizer import get_updater

        self._optimizer = optimizer
        self._set_updater(get_updater(optimizer))

    @property
    def updater(self) -> Any:
        """The updater applied to pushed values (None until an optimizer is set)."""
        return self._updater

    def stored_context(self) -> Any:
        """The context the stored values (and so the updater's states) live on, or None
        while nothing is stored."""
        first = next(iter(self._store.values()), None)
        return None if first is None else first.context

    def _set_updater(self, updater: Any) -> None:
        self._updater = updater

    def set_gradient_compression(self, compression_params: dict) -> None:
        """2-bit compression with error feedback; only 'device' (and 'dist') stores."""
        if "device" not in self._type and "dist" not in self._type:
            raise ValueError("Gradient compression is not supported for this type of kvstore")
        self._compression = make_compression(compression_params)

    def save_optimizer_states(self, fname: Any, dump_optimizer: bool = False) -> None:
        """Write the updater's states (npz + JSON, no pickle) to a path or binary file."""
        assert self._updater is not None, "Cannot save states for distributed training"
        blob = self._updater.get_states(dump_optimizer)
        _write(fname, blob)

    def load_optimizer_states(self, fname: Any) -> None:
        assert self._updater is not None, "Cannot load states for distributed training"
        self._updater.set_states(_read(fname))

    def barrier(self) -> None:
        """Nothing to wait for in one process."""

    def _barrier(self) -> None:
        self.barrier()


def _add(total: Any, raw: Any) -> Any:
    total += raw
    return total


def _write(fname: Any, blob: bytes) -> None:
    if hasattr(fname, "write"):
        fname.write(blob)
    else:
        with open(fname, "wb") as handle:
            handle.write(blob)


def _read(fname: Any) -> bytes:
    if hasattr(fname, "read"):
        return fname.read()
    with open(fname, "rb") as handle:
        return handle.read()

