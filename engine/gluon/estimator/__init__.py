"""``engine.gluon.estimator``: a fit loop for Gluon blocks with event hooks.

>>> import engine as mx
>>> from engine.gluon import nn, loss as gloss
>>> from engine.gluon import estimator
>>> net = nn.Dense(2); net.initialize()
>>> trainer = mx.gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1})
>>> data = mx.gluon.data.DataLoader(mx.gluon.data.ArrayDataset(
...     mx.nd.ones((4, 3)), mx.nd.array([0, 1, 0, 1])), batch_size=4)
>>> est = estimator.fit(net, data, None, gloss.SoftmaxCrossEntropyLoss(), trainer, epochs=1,
...                     metrics=['acc'])  # doctest: +ELLIPSIS
Training begin: using optimizer SGD with current learning rate 0.1000...
Train finished using total ...s with 1 epochs. training accuracy: 0.5000
>>> [m.name for m in est.train_metrics]
['training accuracy']
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ... import metric as _metric
from . import batch_processor, estimator, event_handler
from .batch_processor import BatchProcessor
from .estimator import Estimator
from .event_handler import (
    BatchBegin,
    BatchEnd,
    CheckpointHandler,
    EarlyStoppingHandler,
    EpochBegin,
    EpochEnd,
    EventHandler,
    GradientUpdateHandler,
    LoggingHandler,
    MetricHandler,
    StoppingHandler,
    TrainBegin,
    TrainEnd,
    ValidationHandler,
)


def fit(
    net: Any,
    train_loader: Iterable[Any],
    val_loader: Iterable[Any] | None,
    loss: Any,
    trainer: Any,
    epochs: int,
    metrics: Sequence[Any] | None = None,
    callbacks: Sequence[Any] | None = None,
    context: Any = None,
    begin_epoch: int = 0,
    begin_batch: int = 0,
) -> Estimator:
    """Build an :class:`Estimator` and train; returns it (metrics, counters). A Rudder
    shortcut (MXNet has none).

    ``metrics`` are metric names or instances (training copies; validation gets its own),
    ``callbacks`` are event handlers.
    """
    train_metrics = [_metric.create(m) for m in metrics] if metrics else None
    est = Estimator(net, loss, train_metrics=train_metrics, trainer=trainer, context=context)
    est.fit(train_loader, val_data=val_loader, epochs=epochs, event_handlers=callbacks,
            begin_epoch=begin_epoch, begin_batch=begin_batch)
    return est


__all__ = [
    "BatchProcessor", "batch_processor", "estimator", "event_handler",
    "BatchBegin", "BatchEnd", "CheckpointHandler", "EarlyStoppingHandler", "EpochBegin",
    "EpochEnd", "Estimator", "EventHandler", "GradientUpdateHandler", "LoggingHandler",
    "MetricHandler", "StoppingHandler", "TrainBegin", "TrainEnd", "ValidationHandler", "fit",
]
