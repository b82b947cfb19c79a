"""The abstract key-value store and the ``create`` factory (``mxnet.kvstore``).

A KVStore aggregates values pushed from several devices under one key (summed, not
averaged) and broadcasts the stored value back on pull. With an optimizer set, pushing runs
the update on the stored weight instead of overwriting it.

>>> import engine as mx
>>> kv = mx.kv.create("local")
>>> kv.init(3, mx.nd.zeros((2,)))
>>> kv.push(3, [mx.nd.ones((2,)), mx.nd.ones((2,))])
>>> out = mx.nd.zeros((2,)); kv.pull(3, out=out); out.asnumpy().tolist()
[2.0, 2.0]
"""

from __future__ import annotations

import abc
from typing import Any

from ..registry import Registry

_REGISTRY = Registry("kvstore")
# the one decorator spelling of the engine's registries (KVStoreBase.register is MXNet's)
register = _REGISTRY.register
LOCAL_TYPES = ("local", "device", "nccl", "local_allreduce_cpu", "local_allreduce_device",
               "local_update_cpu")


class KVStoreBase(abc.ABC):
    """What the Trainer and Module need from a store (``mxnet.kvstore.KVStoreBase``)."""

    OPTIMIZER = "optimizer"

    @property
    @abc.abstractmethod
    def type(self) -> str:
        """The store's type string ('local', 'device', ...)."""

    @property
    def rank(self) -> int:
        """This worker's rank (always 0 on one machine)."""
        return 0

    @property
    def num_workers(self) -> int:
        """Number of worker processes (always 1 on one machine)."""
        return 1

    @abc.abstractmethod
    def is_capable(self, capability: str) -> bool:
        """Whether the store supports e.g. ``KVStoreBase.OPTIMIZER`` (updates in the store)."""

    @abc.abstractmethod
    def broadcast(self, key: Any, value: Any, out: Any, priority: int = 0) -> None:
        """Initialise ``key`` with ``value`` and pull it into ``out``."""

    @abc.abstractmethod
    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        """Sum ``value`` across devices into the store and pull the result into ``out``
        (into ``value`` when ``out`` is None)."""

    def set_optimizer(self, optimizer: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot run an optimizer")

    def set_gradient_compression(self, compression_params: dict) -> None:
        raise ValueError("Gradient compression is not supported for this type of kvstore")

    def save_optimizer_states(self, fname: Any, dump_optimizer: bool = False) -> None:
        raise NotImplementedError(f"{type(self).__name__} has no optimizer states")

    def load_optimizer_states(self, fname: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} has no optimizer states")

    @property
    def updater(self) -> Any:
        """The updater run on pushed values (None: this store updates nothing)."""
        return None

    def stored_context(self) -> Any:
        """The context of the stored values and the updater's states (None: none kept)."""
        return None

    @staticmethod
    def register(klass: type) -> type:
        """Register a store class under its lower-cased name."""
        return _REGISTRY.register(klass)


def create(name: Any = "local") -> KVStoreBase:
    """A KVStore: 'local' / 'device' (one machine, several devices), 'dist_sync' /
    'dist_device_sync' / 'dist_async' (several processes, see :mod:`engine.kvstore.dist`;
    the `dist` extra), or a registered store."""
    if isinstance(name, KVStoreBase):
        return name
    if not isinstance(name, str):
        raise TypeError(f"name must be a string or a KVStore, got {type(name).__name__}")
    low = name.lower()
    if low in ("horovod", "byteps"):
        raise NotImplementedError(
            f"kvstore type {name!r} is not provided by Rudder's engine; 'dist_sync' trains "
            f"over several processes with Gloo (CPU) or NCCL (GPU)")
    if "dist" in low:  # as MXNet: 'device' in the name keeps values on devices, '_async' ...
        from .dist import DistKVStore

        return DistKVStore(low)
    if low in LOCAL_TYPES:
        from .local import KVStore

        return KVStore(low)
    if low in _REGISTRY:
        return _REGISTRY.create(low)
    raise ValueError(f"Unknown KVStore type {name!r}; known: {', '.join(LOCAL_TYPES)}, "
                     f"dist_sync, dist_device_sync, dist_async, "
                     f"{', '.join(_REGISTRY.names())}")
