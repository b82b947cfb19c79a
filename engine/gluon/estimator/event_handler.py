"""Event handlers for :class:`~engine.gluon.estimator.Estimator` (MXNet 1.9's
``gluon.contrib.estimator.event_handler``).

A handler mixes in the events it wants and implements the matching method:

==============  ====================================================================
``TrainBegin``  ``train_begin(estimator)``
``EpochBegin``  ``epoch_begin(estimator)``
``BatchBegin``  ``batch_begin(estimator, batch=...)``
``BatchEnd``    ``batch_end(estimator, batch=..., pred=..., label=..., loss=...)``
``EpochEnd``    ``epoch_end(estimator)``
``TrainEnd``    ``train_end(estimator)``
==============  ====================================================================

A true value from ``batch_end`` ends the epoch early (its ``epoch_end`` handlers still
run); a true value from ``epoch_end`` ends training (``train_end`` still runs). Handlers run
in increasing ``priority`` (default 0): :class:`GradientUpdateHandler` (-2000) steps the
optimizer first, :class:`MetricHandler` and :class:`ValidationHandler` (-1000) update the
metrics before user handlers read them, and :class:`LoggingHandler` (+inf) logs last. As in
MXNet, the handlers count epochs and batches themselves, from ``train_begin``.

>>> class PrintLR(BatchEnd):
...     def batch_end(self, estimator, *args, **kwargs):
...         print(estimator.trainer.learning_rate)
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from typing import Any

from ... import metric as metric_mod
from .checkpoint_handler import CheckpointHandler
from .handler_base import (  # noqa: F401 - EventHandler: MXNet's module has it too
    BatchBegin,
    BatchEnd,
    EpochBegin,
    EpochEnd,
    EventHandler,
    TrainBegin,
    TrainEnd,
    check_metrics,
)

__all__ = [
    "TrainBegin", "TrainEnd", "EpochBegin", "EpochEnd", "BatchBegin", "BatchEnd", "StoppingHandler",
    "MetricHandler", "ValidationHandler", "LoggingHandler", "CheckpointHandler",
    "EarlyStoppingHandler", "GradientUpdateHandler",
]


class StoppingHandler(TrainBegin, BatchEnd, EpochEnd):
    """Stop after ``max_epoch`` epochs or ``max_batch`` batches (the estimator's ``epochs``
    or ``batches``), counted from ``train_begin``."""

    def __init__(self, max_epoch: int | None = None, max_batch: int | None = None) -> None:
        self.max_epoch = max_epoch
        self.max_batch = max_batch
        self.current_batch = 0
        self.current_epoch = 0
        self.stop_training = False

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.max_epoch = estimator.max_epoch
        self.max_batch = estimator.max_batch
        self.current_batch = 0
        self.current_epoch = 0

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        self.current_batch += 1
        if self.current_batch == self.max_batch:
            self.stop_training = True
        return self.stop_training

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        self.current_epoch += 1
        if self.current_epoch == self.max_epoch:
            self.stop_training = True
        return self.stop_training


class GradientUpdateHandler(BatchEnd):
    """Take the optimizer step after each batch: ``trainer.step(samples in the batch)``.

    It runs first (priority -2000), so every other batch-end handler sees the updated
    parameters; subclass it to change how gradients are applied (e.g. accumulate).
    """

    def __init__(self, priority: float = -2000) -> None:
        self.priority = priority

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        loss = kwargs["loss"]
        losses = loss if isinstance(loss, list) else [loss]
        estimator.trainer.step(sum(int(part.shape[0]) for part in losses))


class MetricHandler(EpochBegin, BatchEnd):
    """Reset ``metrics`` at each epoch begin and update them after each batch (a
    :class:`engine.metric.Loss` gets the loss, the others ``(label, pred)``)."""

    def __init__(self, metrics: Any, priority: float = -1000) -> None:
        self.metrics = check_metrics(metrics)
        self.priority = priority
        self._kinds_of: list[Any] | None = None
        self._kinds_cache: list[tuple[Any, bool]] = []

    def epoch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        for m in self.metrics:
            m.reset()

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        pred, label, loss = kwargs["pred"], kwargs["label"], kwargs["loss"]
        for m, is_loss in self._kinds():
            if is_loss:
                m.update(0, loss)
            else:
                m.update(label, pred)

    def _kinds(self) -> list[tuple[Any, bool]]:
        # Which metrics take the loss, worked out once per metrics list (this runs per batch).
        if self._kinds_of is not self.metrics or len(self._kinds_cache) != len(self.metrics):
            self._kinds_of = self.metrics
            self._kinds_cache = [(m, isinstance(m, metric_mod.Loss)) for m in self.metrics]
        return self._kinds_cache


class ValidationHandler(TrainBegin, BatchEnd, EpochEnd):
    """Run ``eval_fn(val_data=..., batch_axis=..., event_handlers=...)`` every
    ``epoch_period`` epochs and/or every ``batch_period`` batches."""

    def __init__(self, val_data: Any, eval_fn: Any, epoch_period: int | None = 1,
                 batch_period: int | None = None, priority: float = -1000,
                 event_handlers: Any = None) -> None:
        self.val_data = val_data
        self.eval_fn = eval_fn
        self.epoch_period = epoch_period
        self.batch_period = batch_period
        self.current_batch = 0
        self.current_epoch = 0
        self.priority = priority
        self.event_handlers = event_handlers

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.current_batch = 0
        self.current_epoch = 0

    def _run(self, estimator: Any) -> None:
        self.eval_fn(val_data=self.val_data, batch_axis=estimator.batch_axis,
                     event_handlers=self.event_handlers)

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.current_batch += 1
        if self.batch_period and self.current_batch % self.batch_period == 0:
            self._run(estimator)

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.current_epoch += 1
        if self.epoch_period and self.current_epoch % self.epoch_period == 0:
            self._run(estimator)


def _values_text(metrics: Sequence[Any]) -> str:
    return "".join("%s: %.4f, " % m.get() for m in metrics)


class LoggingHandler(TrainBegin, TrainEnd, EpochBegin, EpochEnd, BatchBegin, BatchEnd):
    """Log training progress and ``metrics`` to the estimator's logger.

    ``log_interval='epoch'`` logs at each epoch's begin and end; an integer ``k`` also logs
    every ``k`` batches. A handler whose metrics are validation ones (the estimator's
    ``evaluate``) logs "Validation Begin" instead of the learning rate.
    """

    def __init__(self, log_interval: int | str = "epoch", metrics: Any = None,
                 priority: float = math.inf) -> None:
        if not isinstance(log_interval, int) and log_interval != "epoch":
            raise ValueError("log_interval must be either an integer or string 'epoch'")
        self.metrics = check_metrics(metrics)
        self.batch_index = 0
        self.current_epoch = 0
        self.processed_samples = 0
        self.priority = priority
        self.log_interval = log_interval
        self.log_interval_time = 0.0

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.train_start = time.time()
        trainer = estimator.trainer
        estimator.logger.info("Training begin: using optimizer %s with current learning rate "
                              "%.4f ", type(trainer.optimizer).__name__, trainer.learning_rate)
        if estimator.max_epoch:
            estimator.logger.info("Train for %d epochs.", estimator.max_epoch)
        else:
            estimator.logger.info("Train for %d batches.", estimator.max_batch)
        self.current_epoch = 0
        self.batch_index = 0
        self.processed_samples = 0
        self.log_interval_time = 0.0

    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        elapsed = time.time() - self.train_start
        text = "Train finished using total %ds with %d epochs. " % (elapsed, self.current_epoch)
        estimator.logger.info((text + _values_text(self.metrics)).rstrip(", "))

    def batch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(self.log_interval, int):
            self.batch_start = time.time()

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(self.log_interval, int):
            self.processed_samples += kwargs["batch"][0].shape[0]
            self.log_interval_time += time.time() - self.batch_start
            if self.batch_index % self.log_interval == 0:
                text = "[Epoch %d][Batch %d][Samples %s] time/interval: %.3fs " % (
                    self.current_epoch, self.batch_index, self.processed_samples,
                    self.log_interval_time)
                self.log_interval_time = 0.0
                estimator.logger.info((text + _values_text(self.metrics)).rstrip(", "))
        self.batch_index += 1

    def epoch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.epoch_start = time.time()
        if any("training" in m.name for m in self.metrics):
            estimator.logger.info("[Epoch %d] Begin, current learning rate: %.4f",
                                  self.current_epoch, estimator.trainer.learning_rate)
        else:
            estimator.logger.info("Validation Begin")

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        elapsed = time.time() - self.epoch_start
        text = "[Epoch %d] Finished in %.3fs, " % (self.current_epoch, elapsed)
        estimator.logger.info((text + _values_text(self.metrics)).rstrip(", "))
        self.current_epoch += 1
        self.batch_index = 0


def comparison(monitor: Any, mode: str, who: str) -> tuple[str, Any]:
    """``('max'|'min', operator)`` for a monitored metric. As MXNet 1.9's code reads (its
    test ``'acc' or 'f1' in name`` is always true), 'auto' means 'max', with a warning."""
    if mode not in ("auto", "min", "max"):
        warnings.warn(f"{who} mode {mode} is unknown, fallback to auto mode.", RuntimeWarning,
                      stacklevel=3)
        mode = "auto"
    if mode == "auto":
        warnings.warn(f"`greater` operator will be used to determine if {monitor.get()[0]} "
                      "has improved. Please specify `mode='min'` to use the `less` operator. "
                      "Specify `mode='max' to disable this warning.`", stacklevel=3)
        mode = "max"
    return mode, (lambda a, b: a > b) if mode == "max" else (lambda a, b: a < b)


class EarlyStoppingHandler(TrainBegin, EpochEnd, TrainEnd):
    """Stop when ``monitor`` has not improved by ``min_delta`` for ``patience`` epochs."""

    def __init__(self, monitor: Any, min_delta: float = 0, patience: int = 0,
                 mode: str = "auto", baseline: float | None = None) -> None:
        if not isinstance(monitor, metric_mod.EvalMetric):
            raise ValueError("Please provide one of the metric objects from "
                             "estimator.train_metrics and estimator.val_metrics as monitor.")
        if isinstance(monitor, metric_mod.CompositeEvalMetric):
            raise ValueError("CompositeEvalMetric is not supported for EarlyStoppingHandler, "
                             "please specify a simple metric instead.")
        self.monitor = monitor
        self.baseline = baseline
        self.patience = patience
        self.mode, self.monitor_op = comparison(monitor, mode, "EarlyStopping")
        self.min_delta = min_delta if self.mode == "max" else -min_delta
        self.wait = 0
        self.stopped_epoch = 0
        self.current_epoch = 0
        self.stop_training = False

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.wait = 0
        self.stopped_epoch = 0
        self.current_epoch = 0
        self.stop_training = False
        if self.baseline is not None:
            self.best = self.baseline
        else:
            self.best = -math.inf if self.mode == "max" else math.inf

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        name, value = self.monitor.get()
        if math.isnan(value):
            warnings.warn(RuntimeWarning(f"{name} is not updated, make sure you pass one of "
                                         "the metric objects from estimator.train_metrics and "
                                         "estimator.val_metrics as monitor."), stacklevel=2)
        elif self.monitor_op(value - self.min_delta, self.best):
            self.best = value
            self.wait = 0
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.stopped_epoch = self.current_epoch
                self.stop_training = True
        self.current_epoch += 1
        return self.stop_training

    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if self.stopped_epoch > 0:
            estimator.logger.info("[Epoch %d] EarlyStoppingHanlder: early stopping due to %s "
                                  "not improving", self.stopped_epoch, self.monitor.get()[0])
