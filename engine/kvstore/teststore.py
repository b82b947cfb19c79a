"""``teststore``: a sum-and-broadcast store for tests (MXNet's ``mxnet.kvstore.base.TestStore``).

It has no optimizer support, so a Trainer using it reduces gradients on the store and
updates on the devices. As in MXNet it is reached by name, not exported by the package.

>>> import engine as mx
>>> kv = mx.kv.create("teststore")
>>> out = [mx.nd.zeros((2,)), mx.nd.zeros((2,))]
>>> kv.pushpull(0, [mx.nd.ones((2,)), mx.nd.ones((2,))], out=out); out[1].asnumpy().tolist()
[2.0, 2.0]
"""

from __future__ import annotations

from typing import Any

from ..ndarray import NDArray
from .base import KVStoreBase, register
from .local import _add, _as_list


@register
class TestStore(KVStoreBase):
    """A pure sum-and-broadcast store without optimizer support (MXNet 2.x ``teststore``)."""

    __test__ = False  # not a pytest class

    @property
    def type(self) -> str:
        return "teststore"

    def is_capable(self, capability: str) -> bool:
        return False

    def broadcast(self, key: Any, value: Any, out: Any, priority: int = 0) -> None:
        for o in _as_list(out):
            value.copyto(o)

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        values = _as_list(value)
        total = values[0].raw.copy()
        for v in values[1:]:
            total = _add(total, v.as_in_context(values[0].context).raw)
        for o in _as_list(value if out is None else out):
            NDArray(total, values[0].context).copyto(o)
