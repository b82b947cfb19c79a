"""``BatchProcessor``: what the Estimator does with one batch, replaceable (MXNet 1.9).

Subclass it and pass ``Estimator(..., batch_processor=MyProcessor())`` to change how a batch
is trained or evaluated; both methods return ``(data, label, pred, loss)`` as per-context
lists (the batch is split over ``estimator.context`` along ``batch_axis`` with
``gluon.utils.split_and_load``).

>>> from engine.gluon.contrib.estimator import BatchProcessor
>>> class Logged(BatchProcessor):
...     def fit_batch(self, estimator, train_batch, batch_axis=0):
...         return super().fit_batch(estimator, train_batch, batch_axis)
>>> callable(Logged().evaluate_batch)
True
"""

from __future__ import annotations

from typing import Any

from ... import autograd
from ..utils import split_and_load


class BatchProcessor:
    """The default: forward + loss (+ backward when training) on each context's share."""

    def _get_data_and_label(self, batch: Any, ctx: Any, batch_axis: int = 0) -> tuple[Any, Any]:
        data = split_and_load(batch[0], ctx_list=ctx, batch_axis=batch_axis)
        label = split_and_load(batch[1], ctx_list=ctx, batch_axis=batch_axis)
        return data, label

    def evaluate_batch(self, estimator: Any, val_batch: Any, batch_axis: int = 0) -> Any:
        """Forward and loss of ``estimator.val_net``/``val_loss`` on one validation batch."""
        data, label = self._get_data_and_label(val_batch, estimator.context, batch_axis)
        pred = [estimator.val_net(x) for x in data]
        loss = [estimator.val_loss(y_hat, y) for y_hat, y in zip(pred, label, strict=True)]
        return data, label, pred, loss

    def fit_batch(self, estimator: Any, train_batch: Any, batch_axis: int = 0) -> Any:
        """Forward, loss and backward on one training batch (the optimizer step is the
        :class:`GradientUpdateHandler`'s)."""
        data, label = self._get_data_and_label(train_batch, estimator.context, batch_axis)
        with autograd.record():
            pred = [estimator.net(x) for x in data]
            loss = [estimator.loss(y_hat, y) for y_hat, y in zip(pred, label, strict=True)]
        for part in loss:
            part.backward()
        return data, label, pred, loss


__all__ = ["BatchProcessor"]
