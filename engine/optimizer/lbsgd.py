"""LBSGD: large-batch SGD with warmup (MXNet 1.x only; removed in 2.x).

Gradients are accumulated for ``batch_scale`` updates; then one SGD(momentum) step runs with
the accumulated mean gradient and ``lr × multiplier``, the multiplier ramping up over
``warmup_epochs × updates_per_epoch`` accumulated updates ('linear', 'power2', 'sqrt') or the
LARS ratio √(‖w‖²/(‖g‖² + wd·‖w‖²)) clamped to [0.01, 100] ('lars').
"""

from __future__ import annotations

import math
from typing import Any

from ..ndarray import NDArray, zeros
from .optimizer import Optimizer, register
from .segments import WHOLE
from .sgd import _sgd_apply


@register
class LBSGD(Optimizer):
    """Large-batch SGD (per-parameter update; lr is read before counting, as in MXNet).

    The accumulated gradient lives in the state, ``(momentum or None, cum_grad)``, so it is
    saved with the trainer; between applied steps the weight does not change.
    """

    _fusable = False

    def __init__(self, momentum: float = 0.0, multi_precision: bool = False,
                 warmup_strategy: str = "linear", warmup_epochs: int = 5,
                 batch_scale: int = 1, updates_per_epoch: int = 32, begin_epoch: int = 0,
                 num_epochs: int = 60, **kwargs: Any) -> None:
        super().__init__(multi_precision=multi_precision, **kwargs)
        if warmup_strategy not in ("linear", "power2", "sqrt", "lars"):
            raise ValueError(f"unknown warmup_strategy {warmup_strategy!r}")
        self.momentum = momentum
        self.warmup_strategy = warmup_strategy
        self.warmup_epochs = warmup_epochs
        self.batch_scale = batch_scale
        self.updates_per_epoch = updates_per_epoch
        self.init_updates = begin_epoch * updates_per_epoch
        self.num_epochs = num_epochs
        self.num_cums: dict[str, int] = {}

    def create_state(self, index: int, weight: NDArray) -> Any:
        mom = None if self.momentum == 0.0 else zeros(weight.shape, weight.context,
                                                      dtype=weight.dtype)
        return (mom, zeros(weight.shape, weight.context, dtype=weight.dtype))

    def _get_lbmult(self, nup: int) -> float:
        nwup = self.warmup_epochs * self.updates_per_epoch
        maxmult = float(self.batch_scale)
        if nup >= nwup:
            return maxmult
        if nwup <= 1:
            return 1.0
        if self.warmup_strategy == "linear":
            return 1.0 + (maxmult - 1) * nup / nwup
        if self.warmup_strategy == "power2":
            return 1.0 + (maxmult - 1) * (nup * nup) / (nwup * nwup)
        if self.warmup_strategy == "sqrt":
            return 1.0 + (maxmult - 1) * math.sqrt(float(nup) / nwup)
        return 1.0

    def _get_lars(self, w: Any, g: Any, wd: float) -> float:
        w2 = float((w * w).sum())
        g2 = float((g * g).sum())
        lars = math.sqrt(w2 / (g2 + wd * w2 + 1e-18))
        return min(max(lars, 0.01), 100.0)

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        if isinstance(index, (list, tuple)):
            for i, w, g, s in zip(index, weight, grad, state, strict=True):
                self.update(i, w, g, s)
            return
        lr, wd = self._get_lr(index), self._get_wd(index)
        self._update_count(index)
        mom, cum = state
        cum.raw += grad.raw
        key = str(index)
        self.num_cums[key] = self.num_cums.get(key, 0) + 1
        if self.num_cums[key] % self.batch_scale != 0:
            return
        mean_grad = cum.raw / self.batch_scale
        if self.warmup_strategy == "lars":
            lr *= self._get_lars(weight.raw, mean_grad * self.rescale_grad, wd)
        else:
            lr *= self._get_lbmult(self.num_cums[key])
        _sgd_apply(weight.raw, self._scaled(mean_grad), None if mom is None else mom.raw,
                   lr, wd, self.momentum, WHOLE)
        cum.raw[...] = 0

