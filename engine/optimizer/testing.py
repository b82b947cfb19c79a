"""``Test``: the optimizer MXNet's own tests use, exported because MXNet exports it.

It is a test utility, not a training rule: ``w ← w + r·g`` (it *adds* the gradient), and
its state keeps a copy of ``w``, so a test can check both the weight and the state after
an update.

>>> import engine as mx
>>> opt = mx.optimizer.create("test", rescale_grad=0.5)
>>> w, g = mx.nd.ones((2,)), mx.nd.ones((2,))
>>> state = opt.create_state(0, w)
>>> opt.update(0, w, g, state); w.asnumpy().tolist(), state.asnumpy().tolist()
([1.5, 1.5], [1.5, 1.5])
"""

from __future__ import annotations

from typing import Any

from ..ndarray import NDArray, zeros
from .optimizer import Optimizer, register


@register
class Test(Optimizer):
    """The test optimizer of MXNet (``mxnet.optimizer.Test``)."""

    __test__ = False  # not a pytest class
    _elementwise = True

    def create_state(self, index: int, weight: NDArray) -> Any:
        return zeros(weight.shape, weight.context, dtype=weight.dtype)

    def _rule(self, w, g, state, lr, wd, t, seg):
        w += g * self.rescale_grad
        state[...] = w
