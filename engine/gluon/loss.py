"""Gluon losses (``mxnet.gluon.loss``): each returns one loss per sample.

The elementwise loss is multiplied by ``sample_weight`` (broadcast) and by the scalar
``weight``, then averaged over every axis except ``batch_axis``. A registry builds losses
by name: ``loss.create("softmax_cross_entropy")``.

>>> import engine as mx
>>> l2 = mx.gluon.loss.L2Loss()
>>> l2(mx.nd.array([[1.0, 2.0]]), mx.nd.array([[1.0, 4.0]])).asnumpy().tolist()
[1.0]
"""

from __future__ import annotations

from numbers import Number
from typing import Any

from .. import ndarray as nd
from .. import symbol
from ..ndarray.ndarray import NDArray
from ..ndarray.nn_ops import softmax_cross_entropy_sparse
from ..registry import Registry
from .block import HybridBlock, _is_symbol

LOSSES = Registry("loss")
register = LOSSES.register  # the one decorator: ``@register`` or ``@register(aliases=(...))``


def create(name: Any, **kwargs: Any) -> Loss:
    """A loss from a registered name (``l2``, ``softmax_cross_entropy``, ...; any case)."""
    return LOSSES.create(name, **kwargs)  # type: ignore[no-any-return]


def _apply_weighting(loss: NDArray, weight: Any = None, sample_weight: Any = None) -> NDArray:
    if sample_weight is not None:  # broadcast, as MXNet's broadcast_mul (graphs too)
        loss = symbol.broadcast_mul(loss, sample_weight) if _is_symbol(loss) else \
            loss * sample_weight
    if weight is not None:
        if not isinstance(weight, Number):
            raise TypeError(f"weight must be a number, got {type(weight).__name__}")
        loss = loss * weight
    return loss


def _reshape_like(x: Any, y: NDArray) -> Any:
    if _is_symbol(y):
        return symbol.reshape_like(x, y)
    if not isinstance(x, NDArray):
        x = nd.array(x, ctx=y.context, dtype=y.dtype)
    if x.shape == y.shape:
        return x
    if x.size != y.size:
        raise ValueError(f"label of shape {x.shape} does not match prediction of shape {y.shape}")
    return x.reshape(y.shape)


class Loss(HybridBlock):
    """Base class: ``weight`` (scalar), ``batch_axis`` (kept in the output)."""

    def __init__(self, weight: float | None, batch_axis: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._weight = weight
        self._batch_axis = batch_axis

    def __repr__(self) -> str:
        return f"{type(self).__name__}(batch_axis={self._batch_axis}, w={self._weight})"

    def _mean(self, loss: NDArray) -> NDArray:
        if _is_symbol(loss):
            return symbol.mean(loss, axis=self._batch_axis, exclude=True)
        if loss.ndim <= 1 and loss.dtype.__name__.startswith("float"):
            return loss  # nothing to average; an integer loss still goes through mean(),
            # which makes it float32 under mx.np's rules, as MXNet's np losses are
        return loss.mean(axis=self._batch_axis, exclude=True)

    def forward(self, pred: Any, label: Any, *args: Any, **kwargs: Any) -> Any:
        # on Symbols (Module training a Gluon loss) F is engine.symbol, as in MXNet
        F = nd if isinstance(pred, NDArray) or not _is_symbol(pred) else symbol  # noqa: N806
        return self.hybrid_forward(F, pred, label, *args, **kwargs)


@register(aliases=("l2",))
class L2Loss(Loss):
    """``weight/2 · (pred - label)²`` (weight defaults to 1)."""

    def __init__(self, weight: float = 1.0, batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:  # noqa: N803
        label = _reshape_like(label, pred)
        loss = F.square(label - pred)
        return self._mean(_apply_weighting(loss, self._weight / 2, sample_weight))


@register(aliases=("l1",))
class L1Loss(Loss):
    """``|pred - label|``."""

    def __init__(self, weight: float | None = None, batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:  # noqa: N803
        label = _reshape_like(label, pred)
        return self._mean(_apply_weighting(F.abs(label - pred), self._weight, sample_weight))


@register(aliases=("softmax_cross_entropy", "softmaxceloss", "softmax_ce"))
class SoftmaxCrossEntropyLoss(Loss):
    """Cross entropy of ``softmax(pred)`` (or log-probabilities with ``from_logits=True``)
    against class indices (``sparse_label``) or distributions along ``axis``."""

    def __init__(self, axis: int = -1, sparse_label: bool = True, from_logits: bool = False,
                 weight: float | None = None, batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._axis = axis
        self._sparse_label = sparse_label
        self._from_logits = from_logits

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:  # noqa: N803
        if F is symbol:  # a graph: MXNet's operators, the axis as given
            logp = pred if self._from_logits else F.log_softmax(pred, axis=self._axis)
            if self._sparse_label:
                loss = -F.pick(logp, label, axis=self._axis, keepdims=True)
            else:
                loss = -F.sum(logp * _reshape_like(label, logp), axis=self._axis,
                              keepdims=True)
            return self._mean(_apply_weighting(loss, self._weight, sample_weight))
        axis = self._axis % pred.ndim
        if self._sparse_label and not self._from_logits:
            # fused log-softmax + pick: one node, gradient softmax - onehot
            loss = softmax_cross_entropy_sparse(pred, label, axis=axis)
            if self._weight is None and sample_weight is None and loss.ndim <= 1:
                return loss  # already the per-sample loss: skip no-op nodes on the hot path
            loss = loss.expand_dims(axis)
        else:
            logp = pred if self._from_logits else F.log_softmax(pred, axis=axis)
            if self._sparse_label:
                loss = -F.pick(logp, label, axis=axis, keepdims=True)
            else:
                label = _reshape_like(label, logp)
                loss = -(logp * label).sum(axis=axis, keepdims=True)
        return self._mean(_apply_weighting(loss, self._weight, sample_weight))


SoftmaxCELoss = SoftmaxCrossEntropyLoss


@register(aliases=("sigmoid_binary_cross_entropy", "sigmoidbceloss", "sigmoid_bce"))
class SigmoidBinaryCrossEntropyLoss(Loss):
    """Binary cross entropy on logits (or probabilities with ``from_sigmoid=True``);
    ``pos_weight`` (a forward argument, as in MXNet) weighs the positive term."""

    def __init__(self, from_sigmoid: bool = False, weight: float | None = None,
                 batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._from_sigmoid = from_sigmoid

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None,  # noqa: N803
                       pos_weight: Any = None) -> Any:
        label = _reshape_like(label, pred)
        if not self._from_sigmoid:
            if pos_weight is None:
                # max(x,0) - x·y + log(1+exp(-|x|)), stable for large |x|
                loss = F.relu(pred) - pred * label + F.Activation(-F.abs(pred), act_type="softrelu")
            else:
                log_weight = 1 + (pos_weight - 1) * label
                loss = pred - pred * label + log_weight * (
                    F.Activation(-F.abs(pred), act_type="softrelu") + F.relu(-pred))
        else:
            eps = 1e-12
            pos = F.log(pred + eps) * label
            if pos_weight is not None:
                pos = pos * pos_weight
            loss = -(pos + F.log(1.0 - pred + eps) * (1.0 - label))
        return self._mean(_apply_weighting(loss, self._weight, sample_weight))


SigmoidBCELoss = SigmoidBinaryCrossEntropyLoss


@register(aliases=("huber",))
class HuberLoss(Loss):
    """``|d| - rho/2`` where ``|d| > rho``, else ``d²/(2·rho)``."""

    def __init__(self, rho: float = 1, weight: float | None = None, batch_axis: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._rho = rho

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:  # noqa: N803
        label = _reshape_like(label, pred)
        dist = F.abs(label - pred)
        loss = F.where(dist > self._rho, dist - 0.5 * self._rho,
                       (0.5 / self._rho) * F.square(dist))
        return self._mean(_apply_weighting(loss, self._weight, sample_weight))


@register(aliases=("kl_div", "kldiv"))
class KLDivLoss(Loss):
    """``Σ label · (log(label) - pred)`` over the non-batch axes, with ``pred``
    log-probabilities (``from_logits=True``) or raw scores that get a log-softmax."""

    def __init__(self, from_logits: bool = True, axis: int = -1, weight: float | None = None,
                 batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._from_logits = from_logits
        self._axis = axis

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:  # noqa: N803
        if not self._from_logits:
            pred = F.log_softmax(pred, axis=self._axis)
        label = _reshape_like(label, pred)
        loss = _apply_weighting(label * (F.log(label + 1e-12) - pred), self._weight,
                                sample_weight)
        # MXNet 1.9 sums over the non-batch axes here (its docstring says "averaged"; the
        # numbers users got are sums, so Rudder follows the code)
        if F is symbol:
            return F.sum(loss, axis=self._batch_axis, exclude=True)
        if loss.ndim <= 1:
            return loss
        return loss.sum(axis=self._batch_axis, exclude=True)


@register(aliases=("hinge",))
class HingeLoss(Loss):
    """``max(0, margin - pred·label)`` for labels in {-1, 1}."""

    def __init__(self, margin: float = 1, weight: float | None = None, batch_axis: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:  # noqa: N803
        label = _reshape_like(label, pred)
        loss = F.relu(self._margin - pred * label)
        return self._mean(_apply_weighting(loss, self._weight, sample_weight))


@register(aliases=("squared_hinge",))
class SquaredHingeLoss(HingeLoss):
    """``max(0, margin - pred·label)²``."""

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:  # noqa: N803
        label = _reshape_like(label, pred)
        loss = F.square(F.relu(self._margin - pred * label))
        return self._mean(_apply_weighting(loss, self._weight, sample_weight))


@register(aliases=("logistic",))
class LogisticLoss(Loss):
    """``log(1 + exp(-pred·label))`` for labels in {-1, 1} (``label_format='signed'``)
    or {0, 1} (``'binary'``)."""

    def __init__(self, weight: float | None = None, batch_axis: int = 0,
                 label_format: str = "signed", **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        if label_format not in ("signed", "binary"):
            raise ValueError(f"label_format can only be signed or binary, got {label_format!r}")
        self._label_format = label_format

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:  # noqa: N803
        label = _reshape_like(label, pred)
        if self._label_format == "binary":
            label = 2 * label - 1
        loss = F.relu(-pred * label) + F.Activation(-F.abs(-pred * label), act_type="softrelu")
        return self._mean(_apply_weighting(loss, self._weight, sample_weight))


__all__ = [
    "HingeLoss", "HuberLoss", "KLDivLoss", "L1Loss", "L2Loss", "LOSSES", "LogisticLoss", "Loss",
    "SigmoidBCELoss", "SigmoidBinaryCrossEntropyLoss", "SoftmaxCELoss",
    "SoftmaxCrossEntropyLoss", "SquaredHingeLoss", "create",
]


# The newer losses live in their own modules (they import this one's base class).
from .embedding_losses import CosineEmbeddingLoss, SDMLLoss, TripletLoss  # noqa: E402
from .likelihood_losses import CTCLoss, PoissonNLLLoss  # noqa: E402

__all__ += ["CTCLoss", "CosineEmbeddingLoss", "PoissonNLLLoss", "SDMLLoss", "TripletLoss"]
