"""Event handlers for :class:`~engine.gluon.estimator.Estimator` (Gluon's estimator hooks).

A handler mixes in the events it wants and implements the matching method:

==============  ====================================================================
``TrainBegin``  ``train_begin(estimator)``
``EpochBegin``  ``epoch_begin(estimator)``
``BatchBegin``  ``batch_begin(estimator, batch=...)``
``BatchEnd``    ``batch_end(estimator, batch=..., pred=..., label=..., loss=...)``
``EpochEnd``    ``epoch_end(estimator)``
``TrainEnd``    ``train_end(estimator)``
==============  ====================================================================

Returning True from ``batch_end`` or ``epoch_end`` stops training (``train_end`` still
runs). Handlers run in increasing ``priority`` (default 0): the :class:`MetricHandler`
(-1000) updates metrics before user handlers read them, and the :class:`LoggingHandler`
(+inf) logs last.

>>> class PrintLR(BatchEnd):
...     def batch_end(self, estimator, *args, **kwargs):
...         print(estimator.global_step, estimator.trainer.learning_rate)
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from ... import metric as metric_mod

_log = logging.getLogger("engine.gluon.estimator")


def _logger(estimator: Any) -> logging.Logger:
    """The estimator's own logger (stdout, as MXNet 1.9), or the module's for other loops."""
    return getattr(estimator, "logger", None) or _log


class EventHandler:
    """Base of all handlers; ``priority`` orders handlers of the same event."""

    priority: float = 0


class TrainBegin(EventHandler):
    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        pass


class TrainEnd(EventHandler):
    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        pass


class EpochBegin(EventHandler):
    def epoch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        pass


class EpochEnd(EventHandler):
    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool | None:
        return None


class BatchBegin(EventHandler):
    def batch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        pass


class BatchEnd(EventHandler):
    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool | None:
        return None


class StoppingHandler(TrainBegin, BatchEnd, EpochEnd):
    """Stop after ``max_epoch`` epochs or ``max_batch`` optimizer steps (the estimator's
    ``epochs`` / ``batches``), counted from the start of training, resumes included."""

    def __init__(self, max_epoch: int | None = None, max_batch: int | None = None) -> None:
        self.max_epoch = max_epoch
        self.max_batch = max_batch
        self.stop_training = False

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.max_epoch = estimator.max_epoch
        self.max_batch = estimator.max_batch
        self.stop_training = False

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        if self.max_batch is not None and estimator.global_step >= self.max_batch:
            self.stop_training = True
        return self.stop_training

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        if self.max_epoch is not None and estimator.current_epoch + 1 >= self.max_epoch:
            self.stop_training = True
        return self.stop_training


class GradientUpdateHandler(BatchEnd):
    """Take the optimizer step after each batch: ``trainer.step(batch size)``.

    It runs first (priority -2000), so every other batch-end handler sees the updated
    parameters; subclass it to change how gradients are applied (e.g. accumulate).
    """

    def __init__(self, priority: float = -2000) -> None:
        self.priority = priority

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        loss = kwargs["loss"]
        losses = loss if isinstance(loss, (list, tuple)) else [loss]
        estimator.trainer.step(sum(int(l.shape[0]) for l in losses))


class MetricHandler(EpochBegin, BatchEnd):
    """Reset the training metrics at each epoch begin and update them after each batch
    (a :class:`engine.metric.Loss` metric gets the loss, others ``(label, pred)``)."""

    def __init__(self, metrics: Sequence[Any], priority: float = -1000) -> None:
        self.metrics = list(metrics)
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
    """Run ``eval_fn(val_data)`` every ``epoch_period`` epochs and/or ``batch_period`` steps."""

    def __init__(
        self,
        val_data: Any,
        eval_fn: Callable[..., Any],
        epoch_period: int | None = 1,
        batch_period: int | None = None,
        priority: float = -1000,
        event_handlers: Sequence[Any] | None = None,
    ) -> None:
        self.val_data = val_data
        self.eval_fn = eval_fn
        self.epoch_period = epoch_period
        self.batch_period = batch_period
        self.priority = priority
        self.event_handlers = event_handlers

    def _run(self) -> None:
        if self.event_handlers is not None:
            self.eval_fn(self.val_data, event_handlers=self.event_handlers)
        else:
            self.eval_fn(self.val_data)

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if self.batch_period and estimator.global_step % self.batch_period == 0:
            self._run()

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if self.epoch_period and (estimator.current_epoch + 1) % self.epoch_period == 0:
            self._run()


class _MetricText:
    """``name: value, ...`` of some metrics, computed when logging formats it."""

    def __init__(self, metrics: Sequence[Any]) -> None:
        self.metrics = metrics

    def __str__(self) -> str:
        parts = []
        for m in self.metrics:
            for name, value in m.get_name_value():
                parts.append(f"{name}: {value:.4f}")
        return ", ".join(parts)


class LoggingHandler(TrainBegin, TrainEnd, EpochBegin, EpochEnd, BatchEnd):
    """Log training progress and metrics through :mod:`logging`.

    ``log_interval='epoch'`` logs once per epoch; an integer logs every that many batches.
    """

    def __init__(self, log_interval: int | str = "epoch", metrics: Sequence[Any] | None = None,
                 priority: float = math.inf) -> None:
        if not isinstance(log_interval, int) and log_interval != "epoch":
            raise ValueError("log_interval must be 'epoch' or an integer number of batches")
        self.log_interval = log_interval
        self.metrics = list(metrics or [])
        self.priority = priority
        self.batch_index = 0
        self.processed_samples = 0

    def _metric_text(self) -> _MetricText:
        # Formatted only if the record is emitted: reading every metric each epoch (or
        # batch) costs the loop time even when INFO logging is off.
        return _MetricText(self.metrics)

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.train_start = time.time()
        trainer = estimator.trainer
        optimizer = type(getattr(trainer, "_optimizer", trainer)).__name__
        lr = getattr(trainer, "learning_rate", float("nan"))
        _logger(estimator).info(
            "Training begin: using optimizer %s with current learning rate %.4f ",
            optimizer, lr)
        if estimator.max_epoch:
            _logger(estimator).info("Train for %d epochs.", estimator.max_epoch)
        else:
            _logger(estimator).info("Train for %d batches.", estimator.max_batch)

    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        elapsed = time.time() - self.train_start
        _logger(estimator).info("Train finished using total %ds with %d epochs. %s", elapsed,
                                estimator.current_epoch + 1, self._metric_text())

    def epoch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.epoch_start = self.interval_start = time.time()
        self.batch_index = 0
        self.processed_samples = 0
        if isinstance(self.log_interval, int):
            _logger(estimator).info(
                "[Epoch %d] Begin, current learning rate: %.4f", estimator.current_epoch,
                getattr(estimator.trainer, "learning_rate", float("nan")))

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        elapsed = time.time() - self.epoch_start
        _logger(estimator).info(
            "[Epoch %d] Finished in %.3fs, %s", estimator.current_epoch, elapsed,
            self._metric_text())

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if not isinstance(self.log_interval, int):
            return
        self.batch_index += 1
        self.processed_samples += estimator.last_batch_size
        if self.batch_index % self.log_interval == 0:
            now = time.time()
            _logger(estimator).info(
                "[Epoch %d][Batch %d][Samples %d] time/interval: %.3fs %s",
                estimator.current_epoch, estimator.current_batch, self.processed_samples,
                now - self.interval_start, self._metric_text())
            self.interval_start = now


class CheckpointHandler(TrainBegin, BatchEnd, EpochEnd):
    """Save ``net.save_parameters`` and ``trainer.save_states`` periodically.

    Files are ``{model_prefix}-epoch{E}batch{S}.params`` / ``.states`` in ``model_dir``
    (E: epoch index, S: global step); at most ``max_checkpoints`` are kept. With
    ``save_best`` and a ``monitor`` metric, ``{model_prefix}-best.params`` holds the best
    model so far (``mode``: 'min', 'max' or 'auto' — 'max' for accuracy-like names).
    """

    def __init__(
        self,
        model_dir: str,
        model_prefix: str = "model",
        monitor: Any = None,
        verbose: int = 0,
        save_best: bool = False,
        mode: str = "auto",
        epoch_period: int | None = 1,
        batch_period: int | None = None,
        max_checkpoints: int = 5,
        resume_from_checkpoint: bool = False,
    ) -> None:
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"mode must be 'auto', 'min' or 'max', got {mode!r}")
        if save_best and monitor is None:
            raise ValueError("save_best needs a monitor metric")
        self.model_dir = model_dir
        self.model_prefix = model_prefix
        self.monitor = monitor
        self.verbose = verbose
        self.save_best = save_best
        self.epoch_period = epoch_period
        self.batch_period = batch_period
        self.max_checkpoints = max_checkpoints
        self.resume_from_checkpoint = resume_from_checkpoint
        self.saved: list[str] = []
        if mode == "auto":
            name = monitor.get()[0] if monitor is not None else ""
            names = name if isinstance(name, list) else [name]
            mode = "max" if any("acc" in n or "f1" in n for n in names) else "min"
        self.mode = mode
        self.best = -math.inf if mode == "max" else math.inf
        os.makedirs(model_dir, exist_ok=True)

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if self.resume_from_checkpoint:
            latest = self._latest()
            if latest is not None:
                base = os.path.join(self.model_dir, latest)
                estimator.net.load_parameters(base + ".params", ctx=estimator.context)
                if os.path.exists(base + ".states"):
                    estimator.trainer.load_states(base + ".states")
                _logger(estimator).info("Resumed parameters and trainer states from %s", base)

    def _latest(self) -> str | None:
        best: tuple[int, str] | None = None
        prefix = f"{self.model_prefix}-epoch"
        for fname in os.listdir(self.model_dir):
            if fname.startswith(prefix) and fname.endswith(".params"):
                stem = fname[: -len(".params")]
                try:
                    step = int(stem.rsplit("batch", 1)[1])
                except (IndexError, ValueError):
                    continue
                if best is None or step > best[0]:
                    best = (step, stem)
        return None if best is None else best[1]

    def _save(self, estimator: Any) -> None:
        stem = f"{self.model_prefix}-epoch{estimator.current_epoch}batch{estimator.global_step}"
        base = os.path.join(self.model_dir, stem)
        estimator.net.save_parameters(base + ".params")
        if hasattr(estimator.trainer, "save_states"):
            estimator.trainer.save_states(base + ".states")
        if self.verbose:
            _logger(estimator).info(
                "[Epoch %d] Saved checkpoint to %s.params", estimator.current_epoch, base)
        if stem not in self.saved:
            self.saved.append(stem)
        while len(self.saved) > self.max_checkpoints:
            old = os.path.join(self.model_dir, self.saved.pop(0))
            for ext in (".params", ".states"):
                if os.path.exists(old + ext):
                    os.remove(old + ext)
        if self.save_best:
            _, value = self.monitor.get()
            value = value[0] if isinstance(value, list) else value
            better = value > self.best if self.mode == "max" else value < self.best
            if better:
                self.best = value
                best = os.path.join(self.model_dir, f"{self.model_prefix}-best")
                estimator.net.save_parameters(best + ".params")
                if hasattr(estimator.trainer, "save_states"):
                    estimator.trainer.save_states(best + ".states")

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if self.batch_period and estimator.global_step % self.batch_period == 0:
            self._save(estimator)

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if self.epoch_period and (estimator.current_epoch + 1) % self.epoch_period == 0:
            self._save(estimator)


class EarlyStoppingHandler(TrainBegin, EpochEnd):
    """Stop when ``monitor`` has not improved by ``min_delta`` for ``patience`` epochs."""

    def __init__(self, monitor: Any, min_delta: float = 0, patience: int = 0,
                 mode: str = "auto", baseline: float | None = None) -> None:
        name = monitor.get()[0]
        if mode == "auto":
            mode = "max" if "acc" in str(name) or "f1" in str(name) else "min"
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'auto', 'min' or 'max', got {mode!r}")
        self.monitor = monitor
        self.min_delta = abs(min_delta)
        self.patience = patience
        self.mode = mode
        self.baseline = baseline
        self.wait = 0
        self.stopped_epoch: int | None = None

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.wait = 0
        self.stopped_epoch = None
        if self.baseline is not None:
            self.best = self.baseline
        else:
            self.best = -math.inf if self.mode == "max" else math.inf

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        _, value = self.monitor.get()
        improved = (value - self.min_delta > self.best if self.mode == "max"
                    else value + self.min_delta < self.best)
        if improved:
            self.best = value
            self.wait = 0
            return False
        self.wait += 1
        if self.wait >= max(1, self.patience):
            self.stopped_epoch = estimator.current_epoch
            _logger(estimator).info(
                "[Epoch %d] Early stopping: %s did not improve", estimator.current_epoch,
                self.monitor.get()[0])
            return True
        return False


__all__ = [
    "TrainBegin", "TrainEnd", "EpochBegin", "EpochEnd", "BatchBegin", "BatchEnd", "StoppingHandler",
    "MetricHandler", "ValidationHandler", "LoggingHandler", "CheckpointHandler",
    "EarlyStoppingHandler", "GradientUpdateHandler",
]
