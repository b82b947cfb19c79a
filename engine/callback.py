"""Training callbacks (``mx.callback``): Speedometer, checkpointing and metric logging.

Batch-end callbacks receive a :data:`BatchEndParam` ``(epoch, nbatch, eval_metric,
locals)``; epoch-end callbacks receive ``(epoch, symbol, arg_params, aux_params)``.

A ``Speedometer`` resets only the metric's *local* statistics after each log line, and
``Module.score()`` reports the *global* ones, so a Speedometer used while evaluating can
no longer leave the validation score with just the last window of batches.

>>> import logging, engine as mx
>>> speed = mx.callback.Speedometer(batch_size=32, frequent=2)
>>> acc = mx.metric.Accuracy()
>>> for nbatch in range(3):
...     speed(mx.callback.BatchEndParam(epoch=0, nbatch=nbatch, eval_metric=acc, locals=None))
"""

from __future__ import annotations

import logging
import math
import time
from collections import namedtuple
from collections.abc import Callable
from typing import Any

from .model import save_checkpoint

BatchEndParam = namedtuple("BatchEndParam", ["epoch", "nbatch", "eval_metric", "locals"])


def module_checkpoint(
    mod: Any, prefix: str, period: int = 1, save_optimizer_states: bool = False
) -> Callable[..., None]:
    """Epoch-end callback saving ``mod`` (and optionally its optimizer states) every
    ``period`` epochs as ``prefix-symbol.json`` / ``prefix-%04d.params``."""
    period = int(max(1, period))

    def _callback(iter_no: int, sym: Any = None, arg: Any = None, aux: Any = None) -> None:
        if (iter_no + 1) % period == 0:
            mod.save_checkpoint(prefix, iter_no + 1, save_optimizer_states)

    return _callback


def do_checkpoint(prefix: str, period: int = 1) -> Callable[..., None]:
    """Epoch-end callback saving the symbol and parameters every ``period`` epochs.

    Epoch ``e`` (0-based) is saved as ``prefix-%04d.params`` with number ``e + 1``.

    >>> cb = do_checkpoint('/tmp/rudder-doc-model', period=2)
    >>> cb(0, None, {}, {})   # epoch 1 of 2: nothing written yet
    """
    period = int(max(1, period))

    def _callback(iter_no: int, sym: Any, arg: Any, aux: Any) -> None:
        if (iter_no + 1) % period == 0:
            save_checkpoint(prefix, iter_no + 1, sym, arg, aux)

    return _callback


def log_train_metric(period: int, auto_reset: bool = False) -> Callable[[BatchEndParam], None]:
    """Batch-end callback logging ``Iter[%d] Batch[%d] Train-name=value`` every ``period``."""

    def _callback(param: BatchEndParam) -> None:
        if param.nbatch % period == 0 and param.eval_metric is not None:
            for name, value in param.eval_metric.get_name_value():
                logging.info("Iter[%d] Batch[%d] Train-%s=%f", param.epoch, param.nbatch, name,
                             value)
            if auto_reset:
                param.eval_metric.reset_local()

    return _callback


class Speedometer:
    """Log training speed and the metric every ``frequent`` batches.

    The first call only starts the clock. With ``auto_reset`` the metric's local
    statistics are reset after each line, so each line covers its own window
    (``Epoch[e] Batch [a-b]``); the global statistics used for the epoch summary and
    ``score()`` are kept.
    """

    def __init__(self, batch_size: int, frequent: int = 50, auto_reset: bool = True) -> None:
        self.batch_size = batch_size
        self.frequent = frequent
        self.init = False
        self.tic = 0.0
        self.last_count = 0
        self.auto_reset = auto_reset

    def __call__(self, param: BatchEndParam) -> None:
        count = param.nbatch
        if self.last_count > count:  # a new epoch started: restart the clock
            self.init = False
        self.last_count = count
        if not self.init:
            self.init = True
            self.tic = time.time()
            return
        if count % self.frequent != 0:
            return
        elapsed = time.time() - self.tic
        speed = self.frequent * self.batch_size / elapsed if elapsed > 0 else float("inf")
        if param.eval_metric is not None:
            name_value = param.eval_metric.get_name_value()
            values = [item for pair in name_value for item in pair]
            fields = "\t%s=%f" * len(name_value)
            if self.auto_reset:
                param.eval_metric.reset_local()
                logging.info("Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec" + fields,
                             param.epoch, count - self.frequent, count, speed, *values)
            else:
                logging.info("Epoch[%d] Batch [0-%d]\tSpeed: %.2f samples/sec" + fields,
                             param.epoch, count, speed, *values)
        else:
            logging.info("Iter[%d] Batch [%d]\tSpeed: %.2f samples/sec", param.epoch, count,
                         speed)
        self.tic = time.time()


class ProgressBar:
    """Log a text progress bar of ``nbatch`` out of ``total`` batches."""

    def __init__(self, total: int, length: int = 80) -> None:
        self.bar_len = length
        self.total = total

    def __call__(self, param: BatchEndParam) -> None:
        count = param.nbatch
        filled_len = int(round(self.bar_len * count / float(self.total)))
        percents = math.ceil(100.0 * count / float(self.total))
        prog_bar = "=" * filled_len + "-" * (self.bar_len - filled_len)
        logging.info("[%s] %s%s\r", prog_bar, percents, "%")


class LogValidationMetricsCallback:
    """Eval-end callback logging ``Epoch[%d] Validation-name=value`` for each metric.

    It logs the global statistics (the whole evaluation), like ``Module.score``, even when
    a Speedometer reset the local ones during evaluation.
    """

    def __call__(self, param: BatchEndParam) -> None:
        if not param.eval_metric:
            return
        for name, value in param.eval_metric.get_global_name_value():
            logging.info("Epoch[%d] Validation-%s=%f", param.epoch, name, value)
