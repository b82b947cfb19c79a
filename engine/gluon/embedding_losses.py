"""Losses on pairs and triplets of embeddings: ``CosineEmbeddingLoss``, ``TripletLoss`` and
``SDMLLoss`` (``gluon.loss`` names, MXNet 1.9.1's numbers).

>>> import engine as mx
>>> loss = mx.gluon.loss.TripletLoss(margin=1)
>>> a, p, n = mx.nd.array([[0.0, 0.0]]), mx.nd.array([[1.0, 0.0]]), mx.nd.array([[2.0, 0.0]])
>>> loss(a, p, n).asnumpy().tolist()
[0.0]
"""

from __future__ import annotations

from typing import Any

from .. import ndarray as nd
from .loss import KLDivLoss, Loss, _apply_weighting, _reshape_like, register


@register(aliases=("cosine_embedding",))
class CosineEmbeddingLoss(Loss):
    """``1 - cos(x1, x2)`` for label 1, ``max(0, cos(x1, x2) - margin)`` for label -1;
    one value per sample, shape (N, 1), as MXNet returns it."""

    def __init__(self, weight: Any = None, batch_axis: int = 0, margin: float = 0,
                 **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F: Any, input1: Any, input2: Any, label: Any,  # noqa: N803
                       sample_weight: Any = None) -> Any:
        input1 = _reshape_like(input1, input2)
        label = label.reshape((-1, 1))
        cos_sim = self._cosine_similarity(F, input1, input2)
        similar = (1 - cos_sim) * (label == 1)
        dissimilar = F.relu((label == -1) * (cos_sim - self._margin))
        return _apply_weighting(similar + dissimilar, self._weight, sample_weight)

    @staticmethod
    def _cosine_similarity(F: Any, x: Any, y: Any, axis: int = -1) -> Any:  # noqa: N803
        x_norm = F.norm(x, axis=axis).reshape((-1, 1))
        y_norm = F.norm(y, axis=axis).reshape((-1, 1))
        dot = F.sum(x * y, axis=axis).reshape((-1, 1))
        return dot / F.maximum(x_norm * y_norm, 1e-12)


@register(aliases=("triplet",))
class TripletLoss(Loss):
    """``max(0, ‖positive - pred‖² - ‖negative - pred‖² + margin)`` per sample (the squared
    distances summed over every non-batch axis); no ``sample_weight``, as in MXNet."""

    def __init__(self, margin: float = 1, weight: Any = None, batch_axis: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F: Any, pred: Any, positive: Any, negative: Any) -> Any:  # noqa: N803
        positive = _reshape_like(positive, pred)
        negative = _reshape_like(negative, pred)
        loss = F.sum(F.square(positive - pred) - F.square(negative - pred),
                     axis=self._batch_axis, exclude=True)
        return _apply_weighting(F.relu(loss + self._margin), self._weight, None)


@register(aliases=("sdml",))
class SDMLLoss(Loss):
    """Smoothed deep metric learning loss: row i of ``x1`` should be nearest to row i of
    ``x2`` among the batch; KL divergence between softmax(-squared distances) and labels
    smoothed by ``smoothing_parameter``. ``weight`` is accepted and, as in MXNet, unused."""

    def __init__(self, smoothing_parameter: float = 0.3, weight: float = 1.0,
                 batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self.kl_loss = KLDivLoss(from_logits=True)
        self.smoothing_parameter = smoothing_parameter

    def _labels(self, batch_size: int, like: Any) -> Any:
        gold = nd.eye(batch_size, ctx=like.context, dtype=like.dtype)
        off = self.smoothing_parameter / (batch_size - 1)
        return gold * (1 - self.smoothing_parameter) + (1 - gold) * off

    def hybrid_forward(self, F: Any, x1: Any, x2: Any) -> Any:  # noqa: N803
        if x1.shape != x2.shape:
            raise AssertionError(f"SDMLLoss needs inputs of one shape, got {x1.shape} and "
                                 f"{x2.shape}")
        batch_size, dim = x1.shape
        diffs = x1.expand_dims(1).broadcast_to((batch_size, batch_size, dim)) - \
            x2.expand_dims(0).broadcast_to((batch_size, batch_size, dim))
        distances = F.square(diffs).sum(axis=2)
        log_probabilities = F.log_softmax(-distances, axis=1)
        return self.kl_loss(log_probabilities, self._labels(batch_size, distances))
