"""Event handlers on the engine's fit loop: metrics, live learning rate, checkpoints, control.

One handler object implements every hook so the order of effects inside a batch boundary
is explicit (count the step, publish, follow control commands, checkpoint) instead of
depending on handler priorities. Everything expensive (Redis, DB) happens on other
threads; what runs here per batch is a counter, a queue check and, every N batches, a
metric read — that is how the service loop stays within a few percent of the bare loop.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workers.engine_api import engine
from workers.jobio import ControlCommand, JobIO

# Typed as Any: the estimator dispatches on these mixins with isinstance.
_TrainBegin: Any = engine.gluon.estimator.TrainBegin
_BatchEnd: Any = engine.gluon.estimator.BatchEnd
_EpochEnd: Any = engine.gluon.estimator.EpochEnd

log = logging.getLogger(__name__)

# Training stopped because of ... (the runner maps these to job statuses).
STOP_PAUSE = "pause"
STOP_CANCEL = "cancel"
STOP_LEASE_LOST = "lease_lost"
STOP_SHUTDOWN = "shutdown"

# Set when the worker process is asked to stop (SIGTERM): the running job checkpoints at
# the next step boundary and goes back to the queue instead of being lost mid-step.
shutdown_requested = threading.Event()


@dataclass
class LoopState:
    """Where training stands. ``step`` counts optimizer updates done since the start."""

    step: int = 0
    epoch: int = 0
    batch_index: int = 0  # batches of ``epoch`` already trained
    batches_per_epoch: int = 0
    stop_reason: str | None = None
    stop_command_id: str | None = None  # the pause/cancel command that stopped training
    last_metrics: dict[str, float] = field(default_factory=dict)


# The estimator names its metric copies "training accuracy" / "validation accuracy";
# design.md's points are "<split>_<metric>": train_accuracy, val_accuracy.
_ESTIMATOR_PREFIXES = ("training ", "validation ")


def metric_values(prefix: str, metrics: list[Any]) -> dict[str, float]:
    """``{prefix_name: value}`` from engine metrics; NaN (no samples yet) is left out."""
    values: dict[str, float] = {}
    for metric in metrics:
        for name, value in metric.get_name_value():
            for known in _ESTIMATOR_PREFIXES:
                if name.startswith(known):
                    name = name[len(known):]
            number = float(value)
            if math.isfinite(number):
                values[f"{prefix}_{name.replace(' ', '_')}"] = number
    return values


class ServiceHandler(_TrainBegin, _BatchEnd, _EpochEnd):
    """Publishes metrics, applies control commands and checkpoints at batch boundaries.

    Runs after the estimator's MetricHandler and ValidationHandler (priority -1000), so the
    metric values it reads are current; returning True from ``batch_end`` stops training
    at that boundary (the run then checkpoints for a pause, or ends for a cancel).
    """

    priority = 0

    def __init__(
        self,
        io: JobIO,
        state: LoopState,
        *,
        apply_lr: Callable[[ControlCommand], None],
        save_checkpoint: Callable[[str], bool],
        current_lr: Callable[[], float],
        log_every: int,
        checkpoint_every: int,
        min_publish_interval: float = 0.0,
    ) -> None:
        self.io = io
        self.state = state
        self._apply_lr = apply_lr
        self._save_checkpoint = save_checkpoint
        self._current_lr = current_lr
        self.log_every = max(1, log_every)
        # Fast jobs (sub-millisecond steps) would otherwise send hundreds of events a
        # second: more than any chart shows, and a real cost to the training loop.
        self.min_publish_interval = min_publish_interval
        self._last_publish = 0.0
        self.checkpoint_every = checkpoint_every
        self._last_checkpoint_step = state.step

    # -- control -----------------------------------------------------------------------
    def follow_commands(self) -> bool:
        """Apply pending commands at this boundary; True when training must stop now."""
        if not self.io.still_owner():
            self.state.stop_reason = STOP_LEASE_LOST
            return True
        if shutdown_requested.is_set():
            self.state.stop_reason = STOP_SHUTDOWN
            return True
        for command in self.io.poll_commands():
            if command.type == "set_lr":
                self._apply_lr(command)
            elif command.type in ("cancel", "pause"):
                self.state.stop_reason = STOP_CANCEL if command.type == "cancel" else STOP_PAUSE
                self.state.stop_command_id = command.id
                return True
            else:
                log.warning("ignoring unknown control command %r", command.type)
        return False

    # -- estimator hooks ---------------------------------------------------------------
    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        # Changes requested while the job waited in the queue take effect before step 1.
        self.follow_commands()

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        state = self.state
        state.step += 1
        state.batch_index += 1
        if state.step % self.log_every == 0 and (
            time.monotonic() - self._last_publish >= self.min_publish_interval
        ):
            self._publish_train_metrics(estimator)
        if self.follow_commands():
            return True
        if self.checkpoint_every and state.step - self._last_checkpoint_step >= (
            self.checkpoint_every
        ):
            self.checkpoint("interval")
        return False

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        state = self.state
        values = metric_values("train", list(getattr(estimator, "train_metrics", [])))
        values.update(metric_values("val", list(getattr(estimator, "val_metrics", []))))
        values["lr"] = self._current_lr()
        self._emit_metrics(values)
        state.epoch += 1
        state.batch_index = 0
        return state.stop_reason is not None

    # -- helpers -----------------------------------------------------------------------
    def checkpoint(self, reason: str) -> bool:
        ok = self._save_checkpoint(reason)
        if ok:
            self._last_checkpoint_step = self.state.step
        return ok

    def _publish_train_metrics(self, estimator: Any) -> None:
        values = metric_values("train", list(getattr(estimator, "train_metrics", [])))
        values["lr"] = self._current_lr()
        self._emit_metrics(values)

    def _emit_metrics(self, values: dict[str, float]) -> None:
        state = self.state
        self._last_publish = time.monotonic()
        state.last_metrics.update(values)
        if not self.io.still_owner():
            return
        self.io.publish(
            "metric",
            {"step": state.step, "epoch": state.epoch, "time": time.time(), "values": values},
        )
        self.io.record_metrics(state.step, state.epoch, values)
        self.io.record_progress(state.step, state.epoch, values["lr"], dict(state.last_metrics))
