"""``BaseModule``: the high-level loops of MXNet's Module API — ``fit``, ``score``,
``predict``, ``iter_predict`` — written against the intermediate API (``bind``,
``init_params``, ``init_optimizer``, ``forward``, ``backward``, ``update``,
``update_metric``) that :class:`engine.module.Module` implements.

One deliberate difference from MXNet 1.9: ``score()`` returns the metric's *global*
statistics, so a ``Speedometer`` (which resets the local ones every few batches) passed as
``eval_batch_end_callback`` no longer shrinks the validation score to its last window.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .. import metric as metric_mod
from ..callback import BatchEndParam
from ..ndarray import NDArray
from ..ndarray.shape_ops import concat


def _as_list(obj: Any) -> list[Any]:
    if obj is None:
        return []
    if isinstance(obj, (list, tuple)):
        return list(obj)
    return [obj]


class BaseModule:
    """The training/evaluation loops shared by modules."""

    def __init__(self, logger: Any = logging) -> None:
        self.logger = logger
        self.binded = False
        self.for_training = False
        self.inputs_need_grad = False
        self.params_initialized = False
        self.optimizer_initialized = False
        self._symbol: Any = None

    # -------------------------------------------------------------- evaluation
    def forward_backward(self, data_batch: Any) -> None:
        """A training forward pass followed by backward."""
        self.forward(data_batch, is_train=True)
        self.backward()

    def prepare(self, data_batch: Any, sparse_row_id_fn: Any = None) -> None:
        """Hook run before each batch (nothing to prepare for dense parameters)."""

    def score(
        self,
        eval_data: Any,
        eval_metric: Any,
        num_batch: int | None = None,
        batch_end_callback: Any = None,
        score_end_callback: Any = None,
        reset: bool = True,
        epoch: int = 0,
        sparse_row_id_fn: Any = None,
    ) -> list[tuple[str, float]]:
        """Evaluate ``eval_metric`` on (at most ``num_batch`` batches of) ``eval_data``.

        Returns ``[(name, value), ...]`` over every evaluated batch.
        """
        if not self.binded or not self.params_initialized:
            raise RuntimeError("score() needs a bound module with initialized parameters")
        if reset:
            eval_data.reset()
        if not isinstance(eval_metric, metric_mod.EvalMetric):
            eval_metric = metric_mod.create(eval_metric)
        eval_metric.reset()
        actual_num_batch = 0
        for nbatch, eval_batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(eval_batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(eval_batch, is_train=False)
            self.update_metric(eval_metric, eval_batch.label)
            if batch_end_callback is not None:
                params = BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=eval_metric,
                                       locals=locals())
                for callback in _as_list(batch_end_callback):
                    callback(params)
            actual_num_batch += 1
        if score_end_callback:
            params = BatchEndParam(epoch=epoch, nbatch=actual_num_batch,
                                   eval_metric=eval_metric, locals=locals())
            for callback in _as_list(score_end_callback):
                callback(params)
        return eval_metric.get_global_name_value()

    def iter_predict(self, eval_data: Any, num_batch: int | None = None,
                     reset: bool = True) -> Iterator[tuple[list[NDArray], int, Any]]:
        """Yield ``(outputs, nbatch, batch)`` per batch, padding removed."""
        if not self.binded or not self.params_initialized:
            raise RuntimeError("iter_predict() needs a bound module with initialized parameters")
        if reset:
            eval_data.reset()
        for nbatch, eval_batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(eval_batch)
            self.forward(eval_batch, is_train=False)
            pad = getattr(eval_batch, "pad", 0) or 0
            outputs = [out[0:out.shape[0] - pad] for out in self.get_outputs()]
            yield outputs, nbatch, eval_batch

    def predict(self, eval_data: Any, num_batch: int | None = None, merge_batches: bool = True,
                reset: bool = True, always_output_list: bool = False) -> Any:
        """Run inference over ``eval_data`` (a data iterator, or arrays) and collect outputs.

        With ``merge_batches`` the outputs are concatenated along the batch axis; a single
        output comes back as one NDArray unless ``always_output_list``.
        """
        eval_data = self._as_iterator(eval_data)
        output_list = [
            [out.copy() for out in outputs]
            for outputs, _, _ in self.iter_predict(eval_data, num_batch=num_batch, reset=reset)
        ]
        if not output_list:
            return output_list
        if merge_batches:
            num_outputs = len(output_list[0])
            if any(len(out) != num_outputs for out in output_list):
                raise ValueError("Cannot merge batches, as num of outputs is not the same in "
                                 "mini-batches. Maybe bucketing is used?")
            merged = [concat([out[i] for out in output_list], axis=0)
                      for i in range(num_outputs)]
            if num_outputs == 1 and not always_output_list:
                return merged[0]
            return merged
        return output_list

    def _as_iterator(self, eval_data: Any) -> Any:
        if hasattr(eval_data, "reset") and hasattr(eval_data, "provide_data"):
            return eval_data
        import numpy

        if isinstance(eval_data, (NDArray, numpy.ndarray)):
            from ..io import NDArrayIter

            batch_size = self.data_shapes[0][1][0]
            return NDArrayIter(eval_data, batch_size=batch_size, shuffle=False)
        raise TypeError("eval_data must be a data iterator (io.DataIter) or an array")

    # --------------------------------------------------------------------- fit
    def fit(
        self,
        train_data: Any,
        eval_data: Any = None,
        eval_metric: Any = "acc",
        epoch_end_callback: Callable[..., Any] | Iterable[Any] | None = None,
        batch_end_callback: Callable[..., Any] | Iterable[Any] | None = None,
        kvstore: Any = "local",
        optimizer: Any = "sgd",
        optimizer_params: Any = (("learning_rate", 0.01),),
        eval_end_callback: Any = None,
        eval_batch_end_callback: Any = None,
        initializer: Any = None,
        arg_params: dict[str, NDArray] | None = None,
        aux_params: dict[str, NDArray] | None = None,
        allow_missing: bool = False,
        force_rebind: bool = False,
        force_init: bool = False,
        begin_epoch: int = 0,
        num_epoch: int | None = None,
        validation_metric: Any = None,
        monitor: Any = None,
        sparse_row_id_fn: Any = None,
    ) -> None:
        """Train for epochs ``begin_epoch .. num_epoch - 1`` (MXNet's ``Module.fit``).

        Logs ``Epoch[%d] Train-<metric>=%f`` (global statistics of the epoch),
        ``Epoch[%d] Time cost=%.3f`` and, with ``eval_data``,
        ``Epoch[%d] Validation-<metric>=%f`` through ``self.logger`` (``logging``).
        """
        if num_epoch is None:
            raise ValueError("please specify number of epochs (num_epoch)")
        if initializer is None:
            from .. import initializer as init

            initializer = init.Uniform(0.01)
        self.bind(data_shapes=train_data.provide_data, label_shapes=train_data.provide_label,
                  for_training=True, force_rebind=force_rebind)
        self.init_params(initializer=initializer, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init)
        self.init_optimizer(kvstore=kvstore, optimizer=optimizer,
                            optimizer_params=optimizer_params)
        if monitor is not None:
            self.install_monitor(monitor)
        if validation_metric is None:
            validation_metric = eval_metric
        if not isinstance(eval_metric, metric_mod.EvalMetric):
            eval_metric = metric_mod.create(eval_metric)
        batch_callbacks = _as_list(batch_end_callback)

        for epoch in range(begin_epoch, num_epoch):
            tic = time.time()
            eval_metric.reset()
            eval_name_vals: list[tuple[str, float]] = []
            nbatch = 0
            data_iter = iter(train_data)
            end_of_batch = False
            try:
                next_data_batch = next(data_iter)
            except StopIteration:
                raise ValueError(f"train_data produced no batches in epoch {epoch}") from None
            while not end_of_batch:
                data_batch = next_data_batch
                if monitor is not None:
                    monitor.tic()
                self.forward_backward(data_batch)
                self.update()
                self.update_metric(eval_metric, data_batch.label)
                try:
                    next_data_batch = next(data_iter)
                    self.prepare(next_data_batch, sparse_row_id_fn=sparse_row_id_fn)
                except StopIteration:
                    end_of_batch = True
                if monitor is not None:
                    monitor.toc_print()
                if end_of_batch:
                    # read before the callbacks: a Speedometer may reset the local stats
                    eval_name_vals = eval_metric.get_global_name_value()
                if batch_callbacks:
                    params = BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=eval_metric,
                                           locals=locals())
                    for callback in batch_callbacks:
                        callback(params)
                nbatch += 1

            for name, val in eval_name_vals:
                self.logger.info("Epoch[%d] Train-%s=%f", epoch, name, val)
            toc = time.time()
            self.logger.info("Epoch[%d] Time cost=%.3f", epoch, toc - tic)

            arg_params_now, aux_params_now = self.get_params()
            for callback in _as_list(epoch_end_callback):
                callback(epoch, self.symbol, arg_params_now, aux_params_now)

            if eval_data:
                res = self.score(eval_data, validation_metric,
                                 score_end_callback=eval_end_callback,
                                 batch_end_callback=eval_batch_end_callback, epoch=epoch)
                for name, val in res:
                    self.logger.info("Epoch[%d] Validation-%s=%f", epoch, name, val)
            train_data.reset()

    # ------------------------------------------------------- symbol information
    @property
    def symbol(self) -> Any:
        return self._symbol

    # The intermediate API, implemented by Module.
    def bind(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError

    def init_params(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError

    def init_optimizer(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        raise NotImplementedError

    def backward(self, out_grads: Any = None) -> None:
        raise NotImplementedError

    def update(self) -> None:
        raise NotImplementedError

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        raise NotImplementedError

    def get_outputs(self, merge_multi_context: bool = True) -> list[NDArray]:
        raise NotImplementedError

    def get_params(self) -> tuple[dict[str, NDArray], dict[str, NDArray]]:
        raise NotImplementedError

    @property
    def data_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        raise NotImplementedError
