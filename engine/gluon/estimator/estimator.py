"""A training loop for Gluon blocks with event hooks (Gluon's ``Estimator``).

``fit`` runs ``forward → loss → backward`` for each batch, then the batch-end handlers,
the first of which (:class:`GradientUpdateHandler`) calls ``trainer.step(batch_size)``.
The estimator exposes where training is:

- ``current_epoch``: 0-based index of the epoch being trained,
- ``current_batch``: 0-based index, within its epoch, of the batch being trained,
- ``global_step``: optimizer steps taken so far (counting the batches skipped on resume),
- ``last_batch_size``: samples in the latest batch,
- ``resume_position``: the ``(begin_epoch, begin_batch)`` that continues training from
  this point — what a checkpointing handler records next to the parameters.

Resuming mid-epoch: ``fit(..., begin_epoch=e, begin_batch=b)`` starts at epoch ``e``
and skips the first ``b`` batches of that epoch without computing them. A data loader
with ``set_epoch(epoch)`` is told the epoch before each one (so shuffling is a function
of the epoch and a resumed run sees the same order).

Stopping: a ``batch_end`` or ``epoch_end`` handler returning True stops training. A stop
from ``batch_end`` ends the loop at once: the epoch did not finish, so ``epoch_end``
handlers are not called; ``train_end`` handlers always are.

>>> import engine as mx
>>> from engine.gluon import nn, loss as gloss
>>> from engine.gluon.estimator import Estimator
>>> net = nn.Dense(2); net.initialize()
>>> trainer = mx.gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1})
>>> est = Estimator(net, gloss.SoftmaxCrossEntropyLoss(), trainer=trainer)
>>> data = [(mx.nd.ones((4, 3)), mx.nd.array([0, 1, 0, 1]))]
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
from collections.abc import Iterable, Sequence
from typing import Any

from ... import autograd
from ... import metric as metric_mod
from ...context import Context, cpu, gpu, num_gpus
from ...ndarray import NDArray, array
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


def _suggest_metric_for_loss(loss: Any) -> Any:
    if type(loss).__name__ == "SoftmaxCrossEntropyLoss":
        return metric_mod.Accuracy()
    return None


def _check_metrics(metrics: Any) -> list[Any]:
    if metrics is None:
        return []
    if isinstance(metrics, metric_mod.EvalMetric):
        return [metrics]
    checked = []
    for m in metrics:
        if isinstance(m, str):  # a registered name, as a job spec gives it
            m = metric_mod.create(m)
        if not isinstance(m, metric_mod.EvalMetric):
            raise ValueError(
                f"metrics must be engine.metric.EvalMetric instances or metric names, got "
                f"{type(m).__name__}"
            )
        checked.append(m)
    return checked


def _check_batch_processor(batch_processor: Any) -> Any:
    if batch_processor is None:
        return BatchProcessor()
    if not (callable(getattr(batch_processor, "fit_batch", None))
            and callable(getattr(batch_processor, "evaluate_batch", None))):
        raise ValueError("Customized Batch Processor must contain fit_batch() and "
                         "evaluate_batch() methods")
    return batch_processor


class Estimator:
    """Train a Gluon ``net`` with ``loss`` and ``trainer``; see the module docstring.

    ``train_metrics`` default to Accuracy (for a softmax cross-entropy loss) plus the mean
    loss; their names get the prefix ``'training '`` and the validation copies
    ``'validation '``, as in Gluon. ``context=None`` trains where the net's parameters
    already are; a net not yet initialized goes to the GPUs if any, else the CPU (Gluon's
    default, which would move an already-set-up net away from its Trainer).
    """

    def __init__(
        self,
        net: Any,
        loss: Any,
        train_metrics: Any = None,
        val_metrics: Any = None,
        initializer: Any = None,
        trainer: Any = None,
        context: Any = None,
        val_net: Any = None,
        val_loss: Any = None,
        batch_axis: int = 0,
        batch_processor: Any = None,
    ) -> None:
        # MXNet 1.9: a logger of the estimator's own, outside the logging hierarchy, that
        # writes INFO and above to stdout; add handlers to it to log elsewhere too
        self.logger = logging.Logger(name="Estimator", level=logging.INFO)
        self.logger.addHandler(logging.StreamHandler(sys.stdout))
        self.net = net
        self.loss = loss
        self.val_net = val_net if val_net is not None else net
        self.val_loss = val_loss if val_loss is not None else loss
        self.batch_axis = batch_axis
        self.batch_processor = _check_batch_processor(batch_processor)
        self.context = self._check_context(context if context is not None
                                           else self._net_contexts())
        self._initialize(initializer)
        self.trainer = self._check_trainer(trainer)
        self._train_metrics = _check_metrics(train_metrics)
        self._val_metrics = _check_metrics(val_metrics)
        self._add_default_training_metrics()
        self._add_validation_metrics()
        self.current_epoch = 0
        self.current_batch = 0
        self.global_step = 0
        self.last_batch_size = 0
        self.max_epoch: int | None = None
        self.max_batch: int | None = None
        self.stop_training = False
        self._next_batch = 0
        self._epoch_finished = False

    @property
    def resume_position(self) -> tuple[int, int]:
        """``(begin_epoch, begin_batch)`` for a later ``fit`` that continues from here.

        Inside ``batch_end`` it points after the batch just trained; inside ``epoch_end``
        (the epoch's batches are done) it points at the next epoch.
        """
        if self._epoch_finished:
            return self.current_epoch + 1, 0
        return self.current_epoch, self._next_batch

    # ------------------------------------------------------------------ setup
    @staticmethod
    def _check_context(context: Any) -> list[Context]:
        if context is None:
            return [gpu(i) for i in range(num_gpus())] if num_gpus() > 0 else [cpu()]
        if isinstance(context, Context):
            return [context]
        contexts = list(context)
        if not contexts or not all(isinstance(c, Context) for c in contexts):
            raise ValueError("context must be a Context or a non-empty list of Contexts")
        return contexts

    def _net_contexts(self) -> list[Context] | None:
        """The contexts every parameter of the net is already (or deferred) on, if any.

        Without this, a net initialized on the CPU met the GPU default on a machine with a
        GPU, and its Trainer (built for the CPU arrays) could not step: a net that is set up
        trains where it is, and only an uninitialized one goes to the default devices.
        """
        found: list[Context] | None = None
        for param in self.net.collect_params().values():
            if param._ctx_data is None and not getattr(param, "_deferred_init", None):
                return None
            ctx = param.list_ctx()
            if found is not None and ctx != found:
                return None
            found = ctx
        return found

    def _initialize(self, initializer: Any) -> None:
        params = self.net.collect_params()
        uninitialized = [p for p in params.values() if p._ctx_data is None
                         and not getattr(p, "_deferred_init", None)]
        if initializer is not None:
            self.net.initialize(init=initializer, ctx=self.context, force_reinit=True)
        elif uninitialized and len(uninitialized) == len(params):
            from ... import initializer as init

            self.net.initialize(init=init.Xavier(), ctx=self.context)

    def _check_trainer(self, trainer: Any) -> Any:
        if trainer is None:
            from ..trainer import Trainer

            self.logger.warning("No trainer specified: using SGD with learning rate 0.001")
            return Trainer(self.net.collect_params(), "sgd", {"learning_rate": 0.001})
        return trainer

    def _add_default_training_metrics(self) -> None:
        if not self._train_metrics:
            suggested = _suggest_metric_for_loss(self.loss)
            if suggested is not None:
                self._train_metrics = [suggested]
            loss_name = getattr(self.loss, "name", None) or type(self.loss).__name__.lower()
            self._train_metrics.append(metric_mod.Loss(loss_name.rstrip("0123456789")))
        for m in self._train_metrics:
            # the prefix lets handlers tell training metrics from validation ones
            if not m.name.startswith("training "):
                m.name = "training " + m.name

    def _add_validation_metrics(self) -> None:
        if not self._val_metrics:
            self._val_metrics = []
            for m in self._train_metrics:
                twin = copy.deepcopy(m)
                twin.name = m.name[len("training "):]
                self._val_metrics.append(twin)
        for m in self._val_metrics:
            if not m.name.startswith("validation "):
                m.name = "validation " + m.name

    @property
    def train_metrics(self) -> list[Any]:
        return self._train_metrics

    @property
    def val_metrics(self) -> list[Any]:
        return self._val_metrics

    # ---------------------------------------------------------------- batches
    def _split(self, batch: Any) -> tuple[Any, Any]:
        """``(data, label)`` of a loader batch: a (data, label) pair or an io.DataBatch."""
        if isinstance(batch, (list, tuple)) and len(batch) >= 2:
            return batch[0], batch[1]
        if hasattr(batch, "data") and hasattr(batch, "label"):
            return batch.data[0], batch.label[0]
        if not isinstance(batch, (list, tuple)) or len(batch) < 2:
            raise ValueError("each batch must be (data, label) or an io.DataBatch")
        return batch[0], batch[1]

    def _to_contexts(self, x: Any) -> list[NDArray]:
        if not isinstance(x, NDArray):
            x = array(x)
        if len(self.context) == 1:
            return [x.as_in_context(self.context[0])]
        n = x.shape[self.batch_axis]
        k = len(self.context)
        if n < k:
            raise ValueError(f"a batch of {n} samples cannot be split over {k} contexts")
        bounds = [i * n // k for i in range(k + 1)]
        parts = []
        for ctx, lo, hi in zip(self.context, bounds[:-1], bounds[1:], strict=True):
            key = (slice(None),) * self.batch_axis + (slice(lo, hi),)
            parts.append(x[key].as_in_context(ctx))
        return parts

    def fit_batch(self, train_batch: Any, batch_axis: int | None = None) -> tuple[Any, ...]:
        """Forward and backward on one batch; returns ``(data, label, pred, loss)`` as
        per-context lists. The optimizer step is the :class:`GradientUpdateHandler`'s.
        A ``batch_processor`` given at construction does the work."""
        return self.batch_processor.fit_batch(self, train_batch, batch_axis)  # type: ignore[no-any-return]

    def evaluate_batch(self, val_batch: Any, batch_axis: int | None = None) -> tuple[Any, ...]:
        """Forward and loss on one validation batch (through the ``batch_processor``)."""
        return self.batch_processor.evaluate_batch(self, val_batch, batch_axis)  # type: ignore[no-any-return]

    def _forward_backward(self, train_batch: Any, batch_axis: int | None = None) -> tuple[Any, ...]:
        data, label = self._split(train_batch)
        axis = self.batch_axis if batch_axis is None else batch_axis
        self.last_batch_size = data.shape[axis]
        data_parts, label_parts = self._to_contexts(data), self._to_contexts(label)
        with autograd.record():
            pred = [self.net(x) for x in data_parts]
            loss = [self.loss(y_hat, y) for y_hat, y in zip(pred, label_parts, strict=True)]
        autograd.backward(loss)
        return data_parts, label_parts, pred, loss

    def _forward_predict(self, val_batch: Any, batch_axis: int | None = None) -> tuple[Any, ...]:
        data, label = self._split(val_batch)
        data_parts, label_parts = self._to_contexts(data), self._to_contexts(label)
        with autograd.predict_mode():
            pred = [self.val_net(x) for x in data_parts]
            loss = [self.val_loss(y_hat, y) for y_hat, y in zip(pred, label_parts, strict=True)]
        return data_parts, label_parts, pred, loss

    def evaluate(self, val_data: Iterable[Any], batch_axis: int | None = None,
                 event_handlers: Sequence[Any] | None = None) -> list[tuple[str, float]]:
        """Evaluate on ``val_data``; updates and returns the validation metrics' values."""
        for m in self._val_metrics:
            m.reset()
        _reset_iterator(val_data)
        handlers = sorted(event_handlers or [], key=lambda h: getattr(h, "priority", 0))
        begin = [h for h in handlers if isinstance(h, BatchBegin)]
        end = [h for h in handlers if isinstance(h, BatchEnd)]
        for batch in val_data:
            for h in begin:
                h.batch_begin(self, batch=batch)
            _, label, pred, loss = self.evaluate_batch(batch, batch_axis)
            for m in self._val_metrics:
                if isinstance(m, metric_mod.Loss):
                    m.update(0, loss)
                else:
                    m.update(label, pred)
            for h in end:
                h.batch_end(self, batch=batch, pred=pred, label=label, loss=loss)
        values: list[tuple[str, float]] = []
        for m in self._val_metrics:
            values.extend(m.get_name_value())
        return values

    # -------------------------------------------------------------------- fit
    def _prepare_default_handlers(self, val_data: Any, event_handlers: Any) -> list[Any]:
        handlers = list(event_handlers or [])
        if not any(isinstance(h, GradientUpdateHandler) for h in handlers):
            handlers.append(GradientUpdateHandler())
        if not any(isinstance(h, StoppingHandler) for h in handlers):
            handlers.append(StoppingHandler(self.max_epoch, self.max_batch))
        if not any(isinstance(h, MetricHandler) for h in handlers):
            handlers.append(MetricHandler(self._train_metrics))
        if val_data is not None and not any(isinstance(h, ValidationHandler) for h in handlers):
            handlers.append(ValidationHandler(val_data, self.evaluate))
        if not any(isinstance(h, LoggingHandler) for h in handlers):
            handlers.append(LoggingHandler(metrics=self._train_metrics + self._val_metrics))
        return sorted(handlers, key=lambda h: getattr(h, "priority", 0))

    def fit(
        self,
        train_data: Iterable[Any],
        val_data: Iterable[Any] | None = None,
        epochs: int | None = None,
        event_handlers: Sequence[Any] | None = None,
        batches: int | None = None,
        begin_epoch: int = 0,
        begin_batch: int = 0,
        batch_axis: int | None = None,
    ) -> None:
        """Train for ``epochs`` epochs (total, counting ``begin_epoch``) or ``batches``
        optimizer steps, calling the event handlers around every batch and epoch."""
        if epochs is None and batches is None:
            raise ValueError("fit needs epochs or batches to know when to stop")
        if begin_epoch < 0 or begin_batch < 0:
            raise ValueError("begin_epoch and begin_batch must be >= 0")
        self.max_epoch, self.max_batch = epochs, batches
        self.stop_training = False
        self.current_epoch = begin_epoch
        self.current_batch = begin_batch
        self.global_step = _steps_before(train_data, begin_epoch, begin_batch)
        handlers = self._prepare_default_handlers(val_data, event_handlers)
        train_begin = [h for h in handlers if isinstance(h, TrainBegin)]
        epoch_begin = [h for h in handlers if isinstance(h, EpochBegin)]
        batch_begin = [h for h in handlers if isinstance(h, BatchBegin)]
        batch_end = [h for h in handlers if isinstance(h, BatchEnd)]
        epoch_end = [h for h in handlers if isinstance(h, EpochEnd)]
        train_end = [h for h in handlers if isinstance(h, TrainEnd)]

        for h in train_begin:
            h.train_begin(self)
        epoch = begin_epoch
        skip = begin_batch
        while not self.stop_training and (epochs is None or epoch < epochs):
            self.current_epoch = epoch
            self.current_batch = skip
            self._next_batch = skip
            self._epoch_finished = False
            for h in epoch_begin:
                h.epoch_begin(self)
            if hasattr(train_data, "set_epoch"):
                train_data.set_epoch(epoch)
            _reset_iterator(train_data)
            batches_iter = _skip_batches(train_data, skip)
            for index, batch in enumerate(batches_iter, start=skip):
                self.current_batch = index
                for h in batch_begin:
                    h.batch_begin(self, batch=batch)
                _, label, pred, loss = self.fit_batch(batch, batch_axis)
                self.global_step += 1
                self._next_batch = index + 1
                stop = False
                for h in batch_end:
                    if h.batch_end(self, batch=batch, pred=pred, label=label, loss=loss):
                        stop = True
                if stop:
                    self.stop_training = True
                    break
            if self.stop_training:
                break
            skip = 0
            self._epoch_finished = True
            for h in epoch_end:
                if h.epoch_end(self):
                    self.stop_training = True
            epoch += 1
        for h in train_end:
            h.train_end(self)


def _reset_iterator(data: Any) -> None:
    # io.DataIter objects are single-pass until reset(); DataLoaders restart on their own.
    if hasattr(data, "reset") and hasattr(data, "provide_data"):
        data.reset()


def _skip_batches(data: Iterable[Any], count: int) -> Iterable[Any]:
    """Iterate ``data`` from batch ``count`` on, without training on the skipped ones."""
    if count == 0:
        return data
    return itertools.islice(iter(data), count, None)


def _steps_before(data: Any, begin_epoch: int, begin_batch: int) -> int:
    """Optimizer steps taken before (begin_epoch, begin_batch), when the epoch length is
    known; handlers may overwrite ``estimator.global_step`` in ``train_begin``."""
    try:
        per_epoch = len(data)
    except TypeError:
        per_epoch = 0
    return begin_epoch * per_epoch + begin_batch


__all__ = ["Estimator"]
