"""Negative log-likelihood losses: ``CTCLoss`` and ``PoissonNLLLoss`` (``gluon.loss`` names).

>>> import engine as mx
>>> loss = mx.gluon.loss.CTCLoss()
>>> [round(float(v), 4) for v in loss(mx.nd.zeros((1, 2, 2)), mx.nd.array([[0]])).asnumpy()]
[0.2877]
"""

from __future__ import annotations

import math
from typing import Any

from .loss import Loss, _apply_weighting, _reshape_like, register


@register(aliases=("ctc",))
class CTCLoss(Loss):
    """Connectionist temporal classification loss per sample. ``pred`` holds unnormalized
    scores in ``layout`` NTC or TNC whose last class is the blank; ``label`` (``label_layout``
    NT or TN) holds classes 0..C-2 padded with -1, or give ``label_lengths``."""

    def __init__(self, layout: str = "NTC", label_layout: str = "NT", weight: Any = None,
                 **kwargs: Any) -> None:
        if layout not in ("NTC", "TNC"):
            raise AssertionError(f"Only 'NTC' and 'TNC' layouts for pred are supported. "
                                 f"Got: {layout}")
        if label_layout not in ("NT", "TN"):
            raise AssertionError(f"Only 'NT' and 'TN' layouts for label are supported. "
                                 f"Got: {label_layout}")
        self._layout = layout
        self._label_layout = label_layout
        super().__init__(weight, label_layout.find("N"), **kwargs)

    def hybrid_forward(self, F: Any, pred: Any, label: Any, pred_lengths: Any = None,  # noqa: N803
                       label_lengths: Any = None, sample_weight: Any = None) -> Any:
        if self._layout == "NTC":
            pred = F.swapaxes(pred, 0, 1)
        if self._batch_axis == 1:
            label = F.swapaxes(label, 0, 1)
        loss = F.CTCLoss(pred, label, pred_lengths, label_lengths,
                         use_data_lengths=pred_lengths is not None,
                         use_label_lengths=label_lengths is not None, blank_label="last")
        return _apply_weighting(loss, self._weight, sample_weight)


@register(aliases=("poisson_nll",))
class PoissonNLLLoss(Loss):
    """Negative log-likelihood of ``target`` under Poisson(rate): ``exp(pred) - target·pred``
    with ``from_logits`` (pred is the log-rate), else ``pred - target·log(pred + epsilon)``;
    ``compute_full`` adds Stirling's term for targets > 1. Returns the mean over everything,
    shape (1,), as MXNet does."""

    def __init__(self, weight: Any = None, from_logits: bool = True, batch_axis: int = 0,
                 compute_full: bool = False, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._from_logits = from_logits
        self._compute_full = compute_full

    def hybrid_forward(self, F: Any, pred: Any, target: Any, sample_weight: Any = None,  # noqa: N803
                       epsilon: float = 1e-08) -> Any:
        target = _reshape_like(target, pred)
        if self._from_logits:
            loss = F.exp(pred) - target * pred
        else:
            loss = pred - target * F.log(pred + epsilon)
        if self._compute_full:
            # Stirling's approximation of log(target!), used only where target > 1; the
            # clamp keeps log() finite on the other targets (MXNet multiplies a NaN by 0
            # there and returns NaN for a zero target; Rudder returns the finite value)
            safe = F.maximum(target, 1.0)
            stirling = safe * F.log(safe) - safe + 0.5 * F.log(2 * math.pi * safe)
            loss = loss + stirling * (target > 1)
        loss = _apply_weighting(loss, self._weight, sample_weight)
        return loss.mean().reshape((1,))
