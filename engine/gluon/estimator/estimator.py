"""A training loop for Gluon blocks with event hooks (MXNet 1.9's Gluon ``Estimator``).

``fit`` takes a ``gluon.data.DataLoader`` (MXNet refuses DataIters and plain lists) and
exactly one of ``epochs``/``batches``. Each batch runs ``forward → loss → backward`` (the
:class:`BatchProcessor`), then the batch-end handlers, the first of which
(:class:`GradientUpdateHandler`) calls ``trainer.step(batch_size)``. The default handlers
(StoppingHandler, GradientUpdateHandler, MetricHandler, a ValidationHandler when there is
validation data, LoggingHandler) are added unless given, then all are ordered by priority.

Rudder adds where training is, for resuming:

- ``current_epoch`` / ``current_batch``: 0-based epoch and batch (within its epoch) being
  trained; ``global_step``: optimizer steps so far (counting the batches skipped on resume);
- ``resume_position``: the ``(begin_epoch, begin_batch)`` that continues from this point.
  ``fit(..., begin_epoch=e, begin_batch=b)`` starts at epoch ``e`` (of ``epochs`` in all)
  and skips the first ``b`` batches of that epoch without computing them; a loader with
  ``set_epoch(epoch)`` is told the epoch before each one.

>>> import engine as mx
>>> from engine.gluon import nn, loss as gloss
>>> from engine.gluon.contrib.estimator import Estimator
>>> net = nn.Dense(2); net.initialize()
>>> trainer = mx.gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1})
>>> est = Estimator(net, gloss.SoftmaxCrossEntropyLoss(), trainer=trainer)
>>> data = mx.gluon.data.DataLoader(mx.gluon.data.ArrayDataset(
...     mx.nd.ones((4, 3)), mx.nd.array([0, 1, 0, 1])), batch_size=4)
>>> est.fit(data, epochs=2)  # the progress goes to stdout, as in MXNet  # doctest: +ELLIPSIS
Training begin: using optimizer SGD with current learning rate 0.1000...
[Epoch 1] Finished in ...
Train finished using total ...s with 2 epochs. ...
>>> est.current_epoch, est.global_step
(1, 2)
"""

from __future__ import annotations

import copy
import itertools
import logging
import sys
import warnings
from typing import Any

from ... import metric as metric_mod
from ...context import Context, cpu, gpu, num_gpus
from ..data import DataLoader
from ..loss import Loss, SoftmaxCrossEntropyLoss
from .batch_processor import BatchProcessor
from .event_handler import (
    BatchBegin,
    BatchEnd,
    EpochBegin,
    EpochEnd,
    GradientUpdateHandler,
    LoggingHandler,
    MetricHandler,
    StoppingHandler,
    TrainBegin,
    TrainEnd,
    ValidationHandler,
)
from .handler_base import check_event_handlers, check_handler_metric_ref, check_metrics
from .resume import Progress

_NOT_A_LOADER = ("Estimator only support input as Gluon DataLoader. Alternatively, you can "
                 "transform your DataIter or any NDArray into Gluon DataLoader. Refer to "
                 "gluon.data.DataLoader")


class Estimator(Progress):
    """Train a Gluon ``net`` with ``loss`` and ``trainer``; see the module docstring.

    ``train_metrics`` default to Accuracy (for a softmax cross-entropy loss) plus the mean
    loss, named ``'training ...'``; ``val_metrics`` default to copies named
    ``'validation ...'``. ``context=None`` trains where an initialized net's parameters
    already are (MXNet would pick the default device; Rudder keeps a set-up net and its
    Trainer together), else on gpu(0) if there is one, else the CPU.
    """

    def __init__(self, net: Any, loss: Any, train_metrics: Any = None, val_metrics: Any = None,
                 initializer: Any = None, trainer: Any = None, context: Any = None,
                 val_net: Any = None, val_loss: Any = None, batch_processor: Any = None) -> None:
        super().__init__()
        self.net = net
        self.loss = _check_loss(loss)
        self._train_metrics = check_metrics(train_metrics)
        self._val_metrics = check_metrics(val_metrics)
        self._add_default_training_metrics()
        self._add_validation_metrics()
        self.val_loss = _check_loss(val_loss) if val_loss is not None else self.loss
        self.val_net = val_net if val_net is not None else net
        # MXNet 1.9: a logger of the estimator's own, outside the logging hierarchy, that
        # writes INFO and above to stdout; add handlers to it to log elsewhere too
        self.logger = logging.Logger(name="Estimator", level=logging.INFO)
        self.logger.addHandler(logging.StreamHandler(sys.stdout))
        self.context = _check_context(context if context is not None else self._net_contexts())
        self._initialize(initializer)
        self.trainer = self._check_trainer(trainer)
        self.batch_processor = _check_batch_processor(batch_processor)
        self.max_epoch: int | None = None
        self.max_batch: int | None = None
        self.batch_axis = 0

    # ------------------------------------------------------------------ setup
    def _net_contexts(self) -> list[Context] | None:
        """The contexts every parameter of an initialized net is on, if they are one set."""
        found: list[Context] | None = None
        for param in self.net.collect_params().values():
            try:
                ctx = param.list_ctx()
            except RuntimeError:
                return None
            if found is not None and ctx != found:
                return None
            found = ctx
        return found

    def _is_initialized(self) -> bool:
        params = self.net.collect_params()
        try:
            for param in params.values():
                param.list_ctx()
        except RuntimeError:
            return False
        return True

    def _initialize(self, initializer: Any) -> None:
        if not self._is_initialized():  # partly or not initialized: the rest, no re-init
            if initializer:
                self.net.initialize(init=initializer, ctx=self.context)
            else:
                self.net.initialize(ctx=self.context)
        elif initializer:
            warnings.warn("Network already fully initialized, skipping initialization. You "
                          "don't need to pass initializer if you already initialized your "
                          "net. You can use net.initialize(init=your_initializer, "
                          "force_reinit=True)to force re-initialize.", stacklevel=3)

    def _check_trainer(self, trainer: Any) -> Any:
        from ..trainer import Trainer

        if not trainer:  # made now, after the net is initialized (its params have data)
            warnings.warn("No trainer specified, default SGD optimizer with learning rate "
                          "0.001 is used.", stacklevel=3)
            return Trainer(self.net.collect_params(), "sgd", {"learning_rate": 0.001})
        if not isinstance(trainer, Trainer):
            raise ValueError(f"Trainer must be a Gluon Trainer instance, refer to "
                             f"gluon.Trainer:{trainer}")
        return trainer

    def _add_default_training_metrics(self) -> None:
        if not self._train_metrics:
            if isinstance(self.loss, SoftmaxCrossEntropyLoss):
                self._train_metrics = [metric_mod.Accuracy()]
            self._train_metrics.append(metric_mod.Loss(self.loss.name.rstrip("1234567890")))
        for m in self._train_metrics:
            # the prefix lets handlers tell training metrics from validation ones
            m.name = "training " + m.name

    def _add_validation_metrics(self) -> None:
        if not self._val_metrics:
            self._val_metrics = [copy.deepcopy(m) for m in self._train_metrics]
        for m in self._val_metrics:
            if "training" in m.name:
                m.name = m.name.replace("training", "validation")
            else:
                m.name = "validation " + m.name

    @property
    def train_metrics(self) -> list[Any]:
        return self._train_metrics

    @property
    def val_metrics(self) -> list[Any]:
        return self._val_metrics

    # ---------------------------------------------------------------- batches
    def fit_batch(self, train_batch: Any, batch_axis: int = 0) -> Any:
        """The batch processor's ``fit_batch`` on this estimator."""
        return self.batch_processor.fit_batch(self, train_batch, batch_axis)

    def evaluate_batch(self, val_batch: Any, batch_axis: int = 0) -> Any:
        """The batch processor's ``evaluate_batch`` on this estimator."""
        return self.batch_processor.evaluate_batch(self, val_batch, batch_axis)

    def evaluate(self, val_data: Any, batch_axis: int = 0,
                 event_handlers: Any = None) -> list[tuple[str, float]]:
        """Evaluate on ``val_data`` (a DataLoader), with a MetricHandler and LoggingHandler
        on the validation metrics unless given; returns the validation metrics' values."""
        if not isinstance(val_data, DataLoader):
            raise ValueError(_NOT_A_LOADER)
        for m in self.val_metrics:
            m.reset()
        handlers = self._prepare_default_validation_handlers(event_handlers)
        _, epoch_begin, batch_begin, batch_end, epoch_end, _ = \
            self._categorize_handlers(handlers)
        for h in epoch_begin:
            h.epoch_begin(self)
        for batch in val_data:
            for h in batch_begin:
                h.batch_begin(self, batch=batch)
            _, label, pred, loss = self.batch_processor.evaluate_batch(self, batch, batch_axis)
            for h in batch_end:
                h.batch_end(self, batch=batch, pred=pred, label=label, loss=loss)
        for h in epoch_end:
            h.epoch_end(self)
        return [pair for m in self.val_metrics for pair in m.get_name_value()]

    # -------------------------------------------------------------------- fit
    def fit(self, train_data: Any, val_data: Any = None, epochs: int | None = None,
            event_handlers: Any = None, batches: int | None = None, batch_axis: int = 0,
            begin_epoch: int = 0, begin_batch: int = 0) -> None:
        """Train for ``epochs`` epochs or ``batches`` batches (one of them), calling the
        event handlers around every batch and epoch; see the module docstring."""
        if not isinstance(train_data, DataLoader):
            raise ValueError(_NOT_A_LOADER)
        if (not epochs) == (not batches):
            raise ValueError("Fit only support exactly one type of iteration, train by number "
                             "of epochs or number of batches. Please specify one and only one "
                             "of: epochs or batches.")
        if begin_epoch < 0 or begin_batch < 0:
            raise ValueError("begin_epoch and begin_batch must be >= 0")
        self.batch_axis = batch_axis
        steps_before = self.start(train_data, begin_epoch, begin_batch)
        # resuming trains what is left (as MXNet's CheckpointHandler shortens them)
        self.max_epoch = epochs - begin_epoch if epochs else None
        self.max_batch = batches - steps_before if batches else None
        handlers = self._prepare_default_handlers(val_data, event_handlers)
        train_begin, epoch_begin, batch_begin, batch_end, epoch_end, train_end = \
            self._categorize_handlers(handlers)
        for h in train_begin:
            h.train_begin(self)
        epoch, skip = begin_epoch, begin_batch
        while True:
            self.begin_epoch_at(epoch, skip)
            for h in epoch_begin:
                h.epoch_begin(self)
            if hasattr(train_data, "set_epoch"):
                train_data.set_epoch(epoch)
            stop = False
            for index, batch in enumerate(itertools.islice(train_data, skip, None), start=skip):
                self.begin_batch_at(index)
                for h in batch_begin:
                    h.batch_begin(self, batch=batch)
                _, label, pred, loss = self.batch_processor.fit_batch(self, batch, batch_axis)
                self.end_batch(int(batch[0].shape[batch_axis]))
                results = [h.batch_end(self, batch=batch, pred=pred, label=label, loss=loss)
                           for h in batch_end]
                if any(results):
                    stop = True
                    break
            self.end_epoch(finished=not stop)
            if any([h.epoch_end(self) for h in epoch_end]):
                break
            epoch, skip = epoch + 1, 0
        for h in train_end:
            h.train_end(self)

    def _prepare_default_handlers(self, val_data: Any, event_handlers: Any) -> list[Any]:
        handlers = check_event_handlers(event_handlers)
        defaults: list[Any] = [StoppingHandler(self.max_epoch, self.max_batch)]
        if not any(isinstance(h, GradientUpdateHandler) for h in handlers):
            defaults.append(GradientUpdateHandler())
        if not any(isinstance(h, MetricHandler) for h in handlers):
            defaults.append(MetricHandler(metrics=self.train_metrics))
        if not any(isinstance(h, ValidationHandler) for h in handlers) and val_data:
            defaults.append(ValidationHandler(val_data=val_data, eval_fn=self.evaluate))
        if not any(isinstance(h, LoggingHandler) for h in handlers):
            defaults.append(LoggingHandler(metrics=self.train_metrics))
        return self._finish_handlers(handlers, defaults, self.train_metrics + self.val_metrics)

    def _prepare_default_validation_handlers(self, event_handlers: Any) -> list[Any]:
        handlers = check_event_handlers(event_handlers)
        defaults: list[Any] = []
        if not any(isinstance(h, MetricHandler) for h in handlers):
            defaults.append(MetricHandler(metrics=self.val_metrics))
        if not any(isinstance(h, LoggingHandler) for h in handlers):
            defaults.append(LoggingHandler(metrics=self.val_metrics))
        return self._finish_handlers(handlers, defaults, self.val_metrics)

    @staticmethod
    def _finish_handlers(handlers: list[Any], defaults: list[Any], known: list[Any]) -> list[Any]:
        # user handlers mixed with default ones must use the estimator's metrics
        mixing = bool(handlers) and bool(defaults)
        handlers.extend(defaults)
        if mixing:
            for h in handlers:
                check_handler_metric_ref(h, set(known))
        handlers.sort(key=lambda h: getattr(h, "priority", 0))
        return handlers

    @staticmethod
    def _categorize_handlers(handlers: list[Any]) -> tuple[list[Any], ...]:
        """The handlers of each event, in order: train_begin, epoch_begin, batch_begin,
        batch_end, epoch_end, train_end."""
        kinds = (TrainBegin, EpochBegin, BatchBegin, BatchEnd, EpochEnd, TrainEnd)
        return tuple([h for h in handlers if isinstance(h, kind)] for kind in kinds)


def _check_loss(loss: Any) -> Any:
    if not isinstance(loss, Loss):
        raise ValueError(f"loss must be a Loss, refer to gluon.loss.Loss:{loss}")
    return loss


def _check_context(context: Any) -> list[Context]:
    gpus = num_gpus()
    available = [gpu(i) for i in range(gpus)]
    if not context:
        if gpus > 1:
            warnings.warn("You have multiple GPUs, gpu(0) will be used by default.To utilize "
                          "all your GPUs, specify context as a list of gpus, e.g. "
                          "context=[mx.gpu(0), mx.gpu(1)] ", stacklevel=3)
        return [gpu(0)] if gpus > 0 else [cpu()]
    if isinstance(context, Context):
        context = [context]
    elif not (isinstance(context, list) and all(isinstance(c, Context) for c in context)):
        raise ValueError("context must be a Context or a list of Context, for example "
                         "mx.cpu() or [mx.gpu(0), mx.gpu(1)], refer to mxnet.Context:"
                         f"{context}")
    for ctx in context:
        assert ctx in available or str(ctx).startswith("cpu"), (
            f"{ctx} is not available, please make sure your context is in one of: mx.cpu(), "
            + ", ".join(str(c) for c in available))
    return list(context)


def _check_batch_processor(batch_processor: Any) -> Any:
    if batch_processor is None:
        return BatchProcessor()
    if not (callable(getattr(batch_processor, "fit_batch", None))
            and callable(getattr(batch_processor, "evaluate_batch", None))):
        raise ValueError("Customized Batch Processor must contain fit_batch() and "
                         "evaluate_batch() methods")
    return batch_processor


__all__ = ["Estimator"]
