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

import engine.gluon.estimator
from core.events import MetricEvent, SetLRCommand
from workers.jobio import JobIO

# The estimator dispatches on these mixins with isinstance.
_TrainBegin = engine.gluon.estimator.TrainBegin
_BatchEnd = engine.gluon.estimator.BatchEnd
_EpochEnd = engine.gluon.estimator.EpochEnd
_TrainEnd = engine.gluon.estimator.TrainEnd

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


@dataclass(frozen=True)
class Pacing:
    """How often the loop does its boundary work (worker settings, not the job spec)."""

    log_every: int = 10  # publish train metrics every N steps ...
    # ... but no more often than this (seconds). Epoch-end metrics are all stored, and
    # sent live at most this often too (the last epoch's always): a job doing fifty
    # epochs a second would otherwise spend its time publishing what no chart can show.
    min_publish_interval: float = 0.0
    # An interval checkpoint is due every ``checkpoint.every_steps`` steps, but no sooner
    # than this many seconds after the previous one: each costs milliseconds of CPU
    # (serialise, hash, write, DB row), which sub-millisecond steps cannot amortise.
    checkpoint_min_interval: float = 0.0


class ServiceHandler(_TrainBegin, _BatchEnd, _EpochEnd, _TrainEnd):
    """Publishes metrics, applies control commands and checkpoints at batch boundaries.

    :func:`workers.loop.run_epochs` calls it after each step's metric updates and after
    each epoch's validation, so the values it reads are current (it is also an estimator
    event handler, priority 0: after the estimator's MetricHandler and ValidationHandler).
    Returning True from ``batch_end`` stops training at that boundary (the run then
    checkpoints for a pause, or ends for a cancel).

    Metric events: train values every ``log_every`` steps and train + val values at each
    epoch end, each kind at most once per ``min_publish_interval`` on the live stream;
    every epoch-end point reaches the DB.

    Per step it only counts and checks two flags: the boundary work runs at the steps it
    is due (metrics, checkpoint, LR replay) or when ``io.wake`` says a command arrived or
    the lease was lost, so a command still takes effect at the very next step boundary.
    """

    priority = 0

    def __init__(
        self,
        io: JobIO,
        state: LoopState,
        *,
        apply_lr: Callable[[SetLRCommand], None],
        save_checkpoint: Callable[[str], bool],
        current_lr: Callable[[], float],
        checkpoint_every: int,
        pacing: Pacing = Pacing(),
        replay: Callable[[int], int | None] | None = None,
    ) -> None:
        self.io = io
        self.state = state
        self._apply_lr = apply_lr
        self._save_checkpoint = save_checkpoint
        self._current_lr = current_lr
        self.pacing = pacing
        self.log_every = max(1, pacing.log_every)
        self.checkpoint_every = checkpoint_every
        # ``replay(step)`` re-applies LR changes due before ``step``; returns the next
        # step that has one (None: no more).
        self._replay = replay
        self._next_replay: int | None = None
        self._last_publish = -math.inf  # batch events
        self._last_epoch_publish = -math.inf
        self._pending_epoch_event: MetricEvent | None = None  # throttled, newest
        self._last_checkpoint_step = state.step
        self._last_checkpoint_time = time.monotonic()
        self._due_step = 0  # the next step whose boundary has work to do

    # -- control -----------------------------------------------------------------------
    def follow_commands(self) -> bool:
        """Apply pending commands at this boundary; True when training must stop now."""
        if self.io.wake.is_set():
            self.io.wake.clear()  # before draining: a command arriving now sets it again
        if not self.io.still_owner():
            self.state.stop_reason = STOP_LEASE_LOST
            return True
        if shutdown_requested.is_set():
            self.state.stop_reason = STOP_SHUTDOWN
            return True
        for command in self.io.poll_commands():
            if isinstance(command, SetLRCommand):
                self._apply_lr(command)
            else:  # pause | cancel: the union has no other members
                self.state.stop_reason = STOP_CANCEL if command.type == "cancel" else STOP_PAUSE
                self.state.stop_command_id = command.command_id
                return True
        return False

    # -- loop hooks --------------------------------------------------------------------
    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self._replay_due()
        # Changes requested while the job waited in the queue take effect before step 1.
        self.follow_commands()
        self._schedule()

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        state = self.state
        state.step += 1
        state.batch_index += 1
        if (state.step < self._due_step and not self.io.wake.is_set()
                and not shutdown_requested.is_set()):
            return False
        return self._boundary(estimator)

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        state = self.state
        values = metric_values("train", list(getattr(estimator, "train_metrics", [])))
        values.update(metric_values("val", list(getattr(estimator, "val_metrics", []))))
        values["lr"] = self._current_lr()
        state.epoch += 1
        state.batch_index = 0
        self._emit_metrics(values, epoch=state.epoch - 1, epoch_end=True)
        return state.stop_reason is not None

    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        # However fast the job, the last epoch's values reach the live stream.
        if self._pending_epoch_event is not None and self.io.still_owner():
            self.io.publish(self._pending_epoch_event)
        self._pending_epoch_event = None

    # -- helpers -----------------------------------------------------------------------
    def _boundary(self, estimator: Any) -> bool:
        """The work of one due step boundary, in a fixed order: publish, follow commands,
        checkpoint, then re-apply LR changes the next step must see."""
        state = self.state
        if state.step % self.log_every == 0 and (
            time.monotonic() - self._last_publish >= self.pacing.min_publish_interval
        ):
            self._publish_train_metrics(estimator)
        if self.follow_commands():
            return True
        if self.checkpoint_every and state.step - self._last_checkpoint_step >= (
            self.checkpoint_every
        ) and (time.monotonic() - self._last_checkpoint_time
               >= self.pacing.checkpoint_min_interval):
            self.checkpoint("interval")
        self._replay_due()
        self._schedule()
        return False

    def _replay_due(self) -> None:
        if self._replay is not None:
            self._next_replay = self._replay(self.state.step + 1)

    def _schedule(self) -> None:
        """Find the next step whose boundary has work: a metric publish, a checkpoint
        (re-checked every ``log_every`` steps while its time floor holds it back), or an
        LR change to replay before the step after it."""
        step = self.state.step
        due = (step // self.log_every + 1) * self.log_every
        checkpoint_due = self._last_checkpoint_step + self.checkpoint_every
        if self.checkpoint_every and checkpoint_due > step:
            due = min(due, checkpoint_due)
        # (an overdue checkpoint is being held back by its time floor: the log_every
        # boundaries re-check it, so the loop does not look at the clock every step)
        if self._next_replay is not None:
            due = min(due, max(self._next_replay - 1, step + 1))
        self._due_step = due

    def checkpoint(self, reason: str) -> bool:
        ok = self._save_checkpoint(reason)
        if ok:
            self._last_checkpoint_step = self.state.step
            self._last_checkpoint_time = time.monotonic()
        return ok

    def _publish_train_metrics(self, estimator: Any) -> None:
        values = metric_values("train", list(getattr(estimator, "train_metrics", [])))
        values["lr"] = self._current_lr()
        self._emit_metrics(values)

    def _emit_metrics(self, values: dict[str, float], epoch: int | None = None,
                      epoch_end: bool = False) -> None:
        """Record ``values`` and publish them, throttled. ``epoch`` is the 0-based epoch
        they belong to (MXNet's numbering; the current one by default); the job's progress
        counts the epochs completed (``state.epoch``), so a finished 12-epoch job shows 12."""
        state = self.state
        now = time.monotonic()
        if not epoch_end:
            self._last_publish = now
        state.last_metrics.update(values)
        if not self.io.still_owner():
            return
        epoch = state.epoch if epoch is None else epoch
        event = MetricEvent(step=state.step, epoch=epoch, epochs_done=state.epoch,
                            time=time.time(), values=values)
        if not epoch_end:
            self.io.publish(event)
        elif now - self._last_epoch_publish >= self.pacing.min_publish_interval:
            self._last_epoch_publish = now
            self._pending_epoch_event = None
            self.io.publish(event)
        else:
            self._pending_epoch_event = event
        self.io.record_metrics(state.step, epoch, values)
        self.io.record_progress(state.step, state.epoch, values["lr"], dict(state.last_metrics))
