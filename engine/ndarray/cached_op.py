"""``nd.CachedOp``: a Symbol run as one imperative operator (MXNet's cached graph).

>>> import engine as mx
>>> op = mx.nd.CachedOp(mx.sym.var('a') * 2 + mx.sym.var('b'))
>>> op(mx.nd.ones((2,)), mx.nd.ones((2,))).asnumpy().tolist()
[3.0, 3.0]
"""

from __future__ import annotations

from typing import Any

from ..base import MXNetError
from .ndarray import write_out

__all__ = ["CachedOp"]


class CachedOp:
    """Call a Symbol on NDArrays given positionally in ``sym.list_inputs()`` order.

    The graph is evaluated op by op (recorded under ``autograd.record()``, so gradients
    flow to the inputs); ``out=`` writes the result into existing arrays. ``flags`` (MXNet's
    static_alloc/static_shape hints) are accepted and have nothing to tune here.
    """

    def __init__(self, sym: Any, flags: Any = ()) -> None:
        self._sym = sym
        self._inputs = sym.list_inputs()
        self.flags = dict(flags)

    def __call__(self, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        if kwargs:
            raise MXNetError(f"CachedOp takes its inputs positionally, got {sorted(kwargs)}")
        if len(args) != len(self._inputs):
            raise MXNetError(f"CachedOp expects {len(self._inputs)} inputs "
                             f"{self._inputs}, got {len(args)}")
        outputs = self._sym.eval(**dict(zip(self._inputs, args, strict=True)))
        result = outputs[0] if len(outputs) == 1 else list(outputs)
        return result if out is None else write_out(result, out)
