"""Metrics on predicted probabilities and losses: CrossEntropy, NegativeLogLikelihood,
Perplexity and Loss (MXNet 1.9 numerics).

>>> from engine import metric, nd
>>> ce = metric.create('ce')
>>> ce.update([nd.array([0, 1, 1])], [nd.array([[0.3, 0.7], [0, 1.], [0.4, 0.6]])])
>>> round(ce.get()[1], 6)
0.571599
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy

from ..backend import array_module
from .arrays import check_label_shapes, raw, same_device
from .base import EvalMetric, register


def _picked(lab: Any, prd: Any) -> Any:
    """``prd[i, label[i]]`` for each row i."""
    xp = array_module(prd)
    lab = lab.ravel()
    if lab.shape[0] != prd.shape[0]:
        raise ValueError(
            f"{lab.shape[0]} labels for {prd.shape[0]} predictions (shape {prd.shape})"
        )
    return prd[xp.arange(lab.shape[0]), lab.astype(numpy.int64)]


class _LogLikelihood(EvalMetric):
    def __init__(self, eps: float, name: str, output_names: Any, label_names: Any,
                 from_logits: bool = False) -> None:
        kwargs = {"from_logits": True} if from_logits else {}
        super().__init__(
            name, eps=eps, output_names=output_names, label_names=label_names,
            has_global_stats=True, **kwargs,
        )
        self.eps = eps
        self.from_logits = from_logits

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, wrap=True)
        for label, pred in zip(labels, preds, strict=True):
            lab, prd = same_device(label, pred)
            xp = array_module(prd)
            if self.from_logits:  # log-softmax on the device; eps is not needed
                shifted = prd - prd.max(axis=-1, keepdims=True)
                log_z = xp.log(xp.exp(shifted).sum(axis=-1))
                picked = _picked(lab, shifted)
                self._add((log_z - picked).sum(), prd.shape[0])
            else:
                prob = _picked(lab, prd)
                self._add(-xp.log(prob + self.eps).sum(), prd.shape[0])


@register(aliases=("ce", "cross-entropy"))
class CrossEntropy(_LogLikelihood):
    """Mean of ``-log(p[label] + eps)`` over samples; predictions are probabilities.

    ``from_logits=True`` (MXNet 2.x's option) takes raw scores instead, as a Gluon net
    trained with ``SoftmaxCrossEntropyLoss`` outputs them.

    >>> from engine import nd
    >>> m = CrossEntropy(from_logits=True)
    >>> m.update([nd.array([0])], [nd.array([[0.0, 0.0]])]); round(m.get()[1], 6)
    0.693147
    """

    def __init__(
        self,
        eps: float = 1e-12,
        name: str = "cross-entropy",
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
        from_logits: bool = False,
    ) -> None:
        super().__init__(eps, name, output_names, label_names, from_logits)


@register(aliases=("nll_loss", "nll-loss"))
class NegativeLogLikelihood(_LogLikelihood):
    """Mean negative log-likelihood of the labels (same numbers as CrossEntropy)."""

    def __init__(
        self,
        eps: float = 1e-12,
        name: str = "nll-loss",
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
        from_logits: bool = False,
    ) -> None:
        super().__init__(eps, name, output_names, label_names, from_logits)


@register
class Perplexity(EvalMetric):
    """``exp(-Σ log max(1e-10, p[label]) / N)``; labels equal to ``ignore_label`` don't count.

    >>> from engine import nd
    >>> m = Perplexity(ignore_label=None)
    >>> m.update([nd.array([0, 1, 1])], [nd.array([[0.3, 0.7], [0, 1.], [0.4, 0.6]])])
    >>> round(m.get()[1], 6)
    1.771098
    """

    def __init__(
        self,
        ignore_label: int | None = None,
        axis: int = -1,
        name: str = "perplexity",
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(
            name, ignore_label=ignore_label, axis=axis, output_names=output_names,
            label_names=label_names, has_global_stats=True,
        )
        self.ignore_label = ignore_label
        self.axis = axis

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, wrap=True)
        for label, pred in zip(labels, preds, strict=True):
            lab, prd = same_device(label, pred)
            xp = array_module(prd)
            if lab.size * prd.shape[-1] != prd.size:
                raise ValueError(f"shape mismatch: {lab.shape} vs. {prd.shape}")
            axis = self.axis % prd.ndim
            idx = lab.astype(numpy.int64).reshape(prd.shape[:axis] + prd.shape[axis + 1:])
            idx = xp.clip(idx, 0, prd.shape[axis] - 1)
            prob = xp.take_along_axis(prd, xp.expand_dims(idx, axis), axis=axis).ravel()
            num = prob.size
            if self.ignore_label is not None:
                ignore = lab.ravel() == self.ignore_label
                num = num - ignore.sum()
                prob = xp.where(ignore, 1.0, prob)
            self._add(-xp.log(xp.maximum(1e-10, prob)).sum(), num)

    def get(self) -> tuple[str, float]:
        if self.num_inst == 0:
            return self.name, float("nan")
        return self.name, math.exp(self.sum_metric / self.num_inst)

    def get_global(self) -> tuple[str, float]:
        if self.global_num_inst == 0:
            return self.name, float("nan")
        return self.name, math.exp(self.global_sum_metric / self.global_num_inst)


@register
class Loss(EvalMetric):
    """Mean of the values of loss outputs (labels are ignored).

    >>> from engine import nd
    >>> m = Loss(); m.update(None, [nd.array([1.0, 3.0])]); m.get()
    ('loss', 2.0)
    """

    def __init__(
        self,
        name: str = "loss",
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(
            name, output_names=output_names, label_names=label_names, has_global_stats=True
        )

    def update(self, _: Any, preds: Any) -> None:
        if not isinstance(preds, (list, tuple)):
            preds = [preds]
        for pred in preds:
            data = raw(pred)
            self._add(data.sum(), data.size)


@register
class Torch(Loss):
    """Mean of loss outputs, named 'torch' (MXNet's metric for torch criterions)."""

    def __init__(self, name: str = "torch", output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None) -> None:
        super().__init__(name, output_names=output_names, label_names=label_names)


@register
class Caffe(Loss):
    """Mean of loss outputs, named 'caffe' (MXNet's metric for caffe criterions)."""

    def __init__(self, name: str = "caffe", output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None) -> None:
        super().__init__(name, output_names=output_names, label_names=label_names)
