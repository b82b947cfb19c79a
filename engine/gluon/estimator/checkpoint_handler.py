"""``CheckpointHandler``: the Estimator's periodic (and best-model) checkpoints, with MXNet
1.9's files, counters and resume rules.

Files are ``{model_dir}/{model_prefix}-epoch{E}batch{B}.params`` and ``.states`` (the
parameters and the Trainer's states), ``E``/``B`` the handler's own epoch and batch counts
(batches counted over the whole run); at most ``max_checkpoints`` are kept. With
``save_best``, ``{model_prefix}-best.*`` holds the best model by ``monitor``. A hybridized
net's graph is written once as ``{model_prefix}-symbol.json``.

``resume_from_checkpoint=True`` loads the newest checkpoint at ``train_begin`` and shortens
the estimator's ``max_epoch``/``max_batch`` by what that checkpoint had trained.

>>> import tempfile
>>> handler = CheckpointHandler(tempfile.mkdtemp(), model_prefix='net', epoch_period=1)
>>> handler.current_epoch, handler.saved_checkpoints
(0, [])
"""

from __future__ import annotations

import math
import os
import warnings
from typing import Any

from ... import metric as metric_mod
from .handler_base import BatchEnd, EpochEnd, TrainBegin

_FORMAT_ERROR = ("Error parsing checkpoint file, please check your checkpoints have the format: "
                 "{model_name}-epoch{epoch_number}batch{batch_number}.params, there should also "
                 "be a .states file for each .params file ")


class CheckpointHandler(TrainBegin, BatchEnd, EpochEnd):
    """Save the parameters and trainer states every ``epoch_period`` epochs and/or
    ``batch_period`` batches (see the module docstring)."""

    def __init__(self, model_dir: str, model_prefix: str = "model", monitor: Any = None,
                 verbose: int = 0, save_best: bool = False, mode: str = "auto",
                 epoch_period: int | None = 1, batch_period: int | None = None,
                 max_checkpoints: int = 5, resume_from_checkpoint: bool = False) -> None:
        from .event_handler import comparison

        self.monitor = monitor
        self.verbose = verbose
        os.makedirs(model_dir, exist_ok=True)
        self.model_dir = model_dir
        self.model_prefix = model_prefix
        self.save_best = save_best
        if save_best and not isinstance(monitor, metric_mod.EvalMetric):
            raise ValueError("To save best model only, please provide one of the metric objects "
                             "from estimator.train_metrics and estimator.val_metrics as monitor.")
        self.epoch_period = epoch_period
        self.batch_period = batch_period
        self.current_batch = 0
        self.current_epoch = 0
        self.max_checkpoints = max_checkpoints
        self.resume_from_checkpoint = resume_from_checkpoint
        self.saved_checkpoints: list[str] = []
        self.trained_epoch = self.trained_batch = -1
        self.mode = mode
        if save_best:
            self.mode, self.monitor_op = comparison(monitor, mode, "ModelCheckpoint")
            self.best = -math.inf if self.mode == "max" else math.inf

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.current_epoch = 0
        self.current_batch = 0
        if self.save_best:
            self.best = -math.inf if self.mode == "max" else math.inf
        if self.resume_from_checkpoint:
            message = ("To use resume from checkpoint, you must only specify the same type of "
                       "period you used for training. For example, if you are training based "
                       "on number of epochs, you must save only based on epochs, and set "
                       "batch_period to None.")
            if estimator.max_batch:
                assert self.batch_period and not self.epoch_period, message
            if estimator.max_epoch:
                assert self.epoch_period and not self.batch_period, message
            self._resume(estimator)

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if self.current_batch == 0:
            self._save_symbol(estimator)
        if self.batch_period and (self.current_batch + 1) % self.batch_period == 0:
            self._save_checkpoint(estimator)
        self.current_batch += 1

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if self.epoch_period and (self.current_epoch + 1) % self.epoch_period == 0:
            self._save_checkpoint(estimator)
        self.current_epoch += 1

    # ------------------------------------------------------------------ saving
    def _save_checkpoint(self, estimator: Any) -> None:
        epoch, batch = self.current_epoch, self.current_batch
        if self.resume_from_checkpoint:  # numbered on from the checkpoint resumed
            epoch += self.trained_epoch + 1
            batch += self.trained_batch + (0 if estimator.max_epoch else 1)
        prefix = f"{self.model_prefix}-epoch{epoch}batch{batch}"
        self._save_params_and_trainer(estimator, prefix)
        if self.verbose > 0:
            estimator.logger.info("[Epoch %d] CheckpointHandler: trained total %d batches, "
                                  "saving model at %s with prefix: %s", self.current_epoch,
                                  self.current_batch + 1, self.model_dir, prefix)
        if self.save_best:
            self._save_if_best(estimator)

    def _save_if_best(self, estimator: Any) -> None:
        name, value = self.monitor.get()
        if math.isnan(value):
            warnings.warn(RuntimeWarning(
                f"Skipping save best because {name} is not updated, make sure you pass one of "
                "the metric objects estimator.train_metrics and estimator.val_metrics as "
                "monitor"), stacklevel=3)
        elif self.monitor_op(value, self.best):
            prefix = self.model_prefix + "-best"
            self._save_params_and_trainer(estimator, prefix)
            if self.verbose > 0:
                estimator.logger.info("[Epoch %d] CheckpointHandler: %s improved from %0.5f to "
                                      "%0.5f, updating best model at %s with prefix: %s",
                                      self.current_epoch, name, self.best, value,
                                      self.model_dir, prefix)
            self.best = value
        elif self.verbose > 0:
            estimator.logger.info("[Epoch %d] CheckpointHandler: %s did not improve from "
                                  "%0.5f, skipping updating best model", self.current_batch,
                                  name, self.best)

    def _save_symbol(self, estimator: Any) -> None:
        path = os.path.join(self.model_dir, self.model_prefix + "-symbol.json")
        net = estimator.net
        if getattr(net, "_active", False) and getattr(net, "_cached_graph", None) is not None:
            from ..symbol_block import block_symbol

            block_symbol(net).save(path)
        else:
            estimator.logger.info(
                "Model architecture(symbol file) is not saved, please use HybridBlock to "
                "construct your model, and call net.hybridize() before passing to Estimator in "
                "order to save model architecture as %s.", path)

    def _save_params_and_trainer(self, estimator: Any, prefix: str) -> None:
        base = os.path.join(self.model_dir, prefix)
        estimator.net.save_parameters(base + ".params")
        estimator.trainer.save_states(base + ".states")
        if "best" not in prefix:
            self.saved_checkpoints.append(prefix)
        if len(self.saved_checkpoints) > self.max_checkpoints:
            oldest = self.saved_checkpoints.pop(0)
            for fname in os.listdir(self.model_dir):
                if fname.startswith(oldest):
                    os.remove(os.path.join(self.model_dir, fname))

    # ---------------------------------------------------------------- resuming
    def _resume(self, estimator: Any) -> None:
        self.trained_epoch = self._newest(f"{self.model_prefix}-epoch", "epoch", "batch")
        self.trained_batch = self._newest(f"{self.model_prefix}-epoch{self.trained_epoch}",
                                          "batch", ".params")
        if self.trained_epoch == -1:
            what = (f"{estimator.max_batch} batches" if estimator.max_batch
                    else f"{estimator.max_epoch} epochs")
            estimator.logger.info("CheckpointHandler: No checkpoint found, training from "
                                  "scratch for %s", what)
            return
        message = (f"CheckpointHandler: Checkpoint resumed from epoch {self.trained_epoch} "
                   f"batch {self.trained_batch}, continue to train for ")
        if estimator.max_epoch:
            if self.trained_epoch >= estimator.max_epoch - 1:
                raise ValueError(f"Found checkpoint with maximum number of epoch "
                                 f"{estimator.max_epoch} reached, please specify "
                                 "resume_from_checkpoint=False (default value) if you wan to "
                                 "train from scratch.")
            estimator.max_epoch -= self.trained_epoch + 1
            message += f"{estimator.max_epoch} epochs "
        if estimator.max_batch:
            if self.trained_batch >= estimator.max_batch - 1:
                raise ValueError(f"Found checkpoint with maximum number of batch "
                                 f"{self.trained_batch} reached, please specify "
                                 "resume_from_checkpoint=False (default value) if you wan to "
                                 "train from scratch.")
            estimator.max_batch -= self.trained_batch + 1
            message += f"{estimator.max_batch} batches "
        base = os.path.join(self.model_dir, f"{self.model_prefix}-epoch{self.trained_epoch}"
                            f"batch{self.trained_batch}")
        for ext in (".params", ".states"):
            assert os.path.exists(base + ext), \
                f"Failed to load checkpoint, {base + ext} does not exist"
        estimator.net.load_parameters(base + ".params", ctx=estimator.context)
        estimator.trainer.load_states(base + ".states")
        estimator.logger.warning(message)

    def _newest(self, prefix: str, start: str, end: str) -> int:
        # (MXNet means to count the files found toward max_checkpoints, but its check of an
        # empty list never lets it: they are never deleted, here neither)
        newest = -1
        for fname in os.listdir(self.model_dir):
            if not (fname.startswith(prefix) and ".params" in fname):
                continue
            try:
                number = int(fname[fname.find(start) + len(start):fname.find(end)])
            except ValueError:
                raise ValueError(_FORMAT_ERROR) from None
            newest = max(newest, number)
        return newest
