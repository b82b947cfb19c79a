"""``BatchProcessor``: what the Estimator does with one batch, replaceable (MXNet 1.9).

Subclass it and pass ``Estimator(..., batch_processor=MyProcessor())`` to change how a batch
is trained or evaluated; both methods return ``(data, label, pred, loss)`` as per-context
lists.

>>> from engine.gluon.contrib.estimator import BatchProcessor
>>> class Logged(BatchProcessor):
...     def fit_batch(self, estimator, train_batch, batch_axis=0):
...         return super().fit_batch(estimator, train_batch, batch_axis)
>>> callable(Logged().evaluate_batch)
True
"""

from __future__ import annotations

from typing import Any


class BatchProcessor:
    """The default: forward + loss (+ backward when training) on each context's share."""

    def fit_batch(self, estimator: Any, train_batch: Any, batch_axis: int = 0) -> Any:
        """Forward and backward on one training batch (the optimizer step is a handler's)."""
        return estimator._forward_backward(train_batch, batch_axis)

    def evaluate_batch(self, estimator: Any, val_batch: Any, batch_axis: int = 0) -> Any:
        """Forward and loss on one validation batch, in predict mode."""
        return estimator._forward_predict(val_batch, batch_axis)


__all__ = ["BatchProcessor"]
