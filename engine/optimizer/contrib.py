"""``mx.optimizer.contrib``: GroupAdaGrad, AdaGrad with one history value per row.

>>> import engine as mx
>>> opt = mx.optimizer.contrib.GroupAdaGrad(learning_rate=0.1)
>>> w, g = mx.nd.ones((2, 3)), mx.nd.ones((2, 3))
>>> opt.update(0, w, g, opt.create_state(0, w)); round(float(w[0, 0].asscalar()), 4)
0.9
"""

from __future__ import annotations

from typing import Any

from ..ndarray import NDArray, zeros
from .optimizer import Optimizer, register

__all__ = ["GroupAdaGrad"]


@register
class GroupAdaGrad(Optimizer):
    """``G = C(r·g)``; ``h_row ← h_row + mean(G_row²)``; ``w ← w − lr·G/√(h_row + eps)``.

    The history has shape ``(rows, 1)``: embeddings share one adaptive rate per row. Weight
    decay is not supported, as in MXNet.
    """

    _fusable = False  # the per-row history is not elementwise

    def __init__(self, eps: float = 1e-5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index: int, weight: NDArray) -> Any:
        return zeros((weight.shape[0], 1), weight.context, dtype=weight.dtype)

    def _rule(self, w, g, history, lr, wd, t, seg):
        if wd:
            raise ValueError("Weight decay is not supported for GroupAdaGrad")
        G = self._scaled(g)
        flat = G.reshape(G.shape[0], -1)
        history += (flat * flat).mean(axis=1, keepdims=True)
        denom = (history + self.float_stable_eps) ** 0.5
        w -= (seg.expand(lr, w) * (flat / denom)).reshape(w.shape)
