"""Event handlers on the engine's fit loop: metrics, step-boundary commands, checkpoints.

One handler object implements every hook so the order of effects inside a batch boundary
is explicit (count the step, publish, follow commands, checkpoint) instead of depending
on handler priorities. Everything expensive (Redis, DB) happens on other
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
from functools import partial
from typing import Any

import engine.gluon.estimator
from core.commands import Command, CommandOutcome
from core.events import MetricEvent
from workers.jobio import JobIO
from workers.steering.apply import ACTIONS
from workers.steering.boundary import Steering

# The estimator dispatches on these mixins with isinstance.
_TrainBegin = engine.gluon.estimator.TrainBegin
_BatchEnd = engine.gluon.estimator.BatchEnd
_EpochEnd = engine.gluon.estimator.EpochEnd
_TrainEnd = engine.gluon.estimator.TrainEnd

log = logging.getLogger(__name__)

# Training stopped because of ... (the runner maps these to job statuses).
STOP_PAUSE = "pause"
STOP_CANCEL = "cancel"
STOP_EARLY = "stop"  # a rule's early stop: the job ends as succeeded
STOP_ROLLBACK = "rollback"
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
    stop_command: Command | None = None  # the command that stopped training
    last_metrics: dict[str, float] = field(default_factory=dict)

    @property
    def stop_command_id(self) -> str | None:
        return None if self.stop_command is None else self.stop_command.command_id


# The estimator names its metric copies "training accuracy" / "validation accuracy";
# design.md's points are "<split>_<metric>": train_accuracy, val_accuracy.
_ESTIMATOR_PREFIXES = ("training ", "validation ")


def metric_values(prefix: str, metrics: list[Any], finite: bool = True) -> dict[str, float]:
    """``{prefix_name: value}`` from engine metrics; NaN and infinities (no samples yet, or
    a diverged loss) are left out unless ``finite`` is False (what the rules look at)."""
    values: dict[str, float] = {}
    for metric in metrics:
        for name, value in metric.get_name_value():
            for known in _ESTIMATOR_PREFIXES:
                if name.startswith(known):
                    name = name[len(known):]
            number = float(value)
            if math.isfinite(number) or not finite:
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



# What each run-ending command makes the loop stop for.
_STOP_REASONS = {"pause": STOP_PAUSE, "cancel": STOP_CANCEL, "stop": STOP_EARLY,
                 "rollback": STOP_ROLLBACK}


def _up_to_each_action(commands: list[Command]) -> list[list[Command]]:
    """``commands`` cut after each action the loop carries out (evaluate, checkpoint)."""
    segments: list[list[Command]] = [[]]
    for command in commands:
        segments[-1].append(command)
        if command.type in ACTIONS:
            segments.append([])
    return [s for s in segments if s]


class ServiceHandler(_TrainBegin, _BatchEnd, _EpochEnd, _TrainEnd):
    """Publishes metrics, carries out step-boundary commands and checkpoints.

    :func:`workers.loop.run_epochs` calls it after each step's metric updates and after
    each epoch's validation, so the values it reads are current (it is also an estimator
    event handler, priority 0: after the estimator's MetricHandler and ValidationHandler).
    Returning True from ``batch_end`` / ``epoch_end`` stops training at that boundary (the
    run then checkpoints for a pause, ends for a cancel, ...).

    Commands: at a boundary the handler hands what the control stream delivered (and, at
    an epoch end, what the rules decided) to :class:`~workers.steering.boundary.Steering`
    to decide what is due (a), takes a checkpoint first if one of them asks for it, has
    them applied to the trainer (b), and carries out the actions (evaluate, checkpoint,
    stop); every command's confirmation goes out through the job's I/O.

    Metric events: train values every ``log_every`` steps and train + val values at each
    epoch end, each kind at most once per ``min_publish_interval`` on the live stream;
    every epoch-end point reaches the DB.

    Per step it only counts and checks two flags: the boundary work runs at the steps it
    is due (metrics, checkpoint, a replayed command, a guard's check) or when ``io.wake``
    says a command arrived or the lease was lost, so a command still takes effect at the
    very next step boundary.
    """

    priority = 0

    def __init__(
        self,
        io: JobIO,
        state: LoopState,
        *,
        steering: Steering,
        save_checkpoint: Callable[..., bool],
        current_lr: Callable[[], float],
        checkpoint_every: int,
        pacing: Pacing = Pacing(),
        replay: Callable[[int], tuple[list[Command], int | None]] | None = None,
        evaluate: Callable[[], dict[str, float]] | None = None,
    ) -> None:
        self.io = io
        self.state = state
        self.steering = steering
        self._save_checkpoint = save_checkpoint
        self._current_lr = current_lr
        # (step, the lr that step trained with), taken at its boundary before the commands
        # there may change the lr for the steps after it
        self._boundary_lr: tuple[int, float] | None = None
        self._evaluate = evaluate
        self.pacing = pacing
        self.log_every = max(1, pacing.log_every)
        self.checkpoint_every = checkpoint_every
        # ``replay(step)`` returns the commands to re-apply before ``step`` (confirmed in
        # an earlier run after the checkpoint this run resumed from) and the next step
        # that has one (None: no more).
        self._replay = replay
        self._next_replay: int | None = None
        self._last_publish = -math.inf  # batch events
        self._last_epoch_publish = -math.inf
        # the newest epoch-end event held back by the throttle, built when sent
        self._pending_epoch_event: Callable[[], MetricEvent] | None = None
        self._last_checkpoint_step = state.step
        self._last_checkpoint_time = time.monotonic()
        self._due_step = 0  # the next step whose boundary has work to do
        self._view: Any = None  # the loop's metrics view, for a guard's check

    # -- commands ----------------------------------------------------------------------
    def follow_commands(self, rules: list[Command] | None = None) -> bool:
        """Carry out what is due at this boundary; True when training must stop now."""
        if self.io.wake.is_set():
            self.io.wake.clear()  # before draining: a command arriving now sets it again
        if not self.io.still_owner():
            self.state.stop_reason = STOP_LEASE_LOST
            return True
        if shutdown_requested.is_set():
            self.state.stop_reason = STOP_SHUTDOWN
            return True
        received = self.io.poll_commands()
        if not received and not rules:  # the usual boundary: nothing to decide
            return False
        return self._carry_out(received, rules or [])

    def _carry_out(self, received: list[Command], rules: list[Command],
                   replaying: bool = False) -> bool:
        due, refused = self.steering.due(received, self.state.step, rules)
        self._confirm(refused, replaying)
        return self._apply_due(due, replaying)

    def _apply_due(self, due: list[Command], replaying: bool = False) -> bool:
        """Apply the commands decided for this boundary; True when training must stop.
        (Every rank of a distributed job runs this on the list rank 0 decided.)"""
        state = self.state
        if not due:
            return False
        if not replaying and any(c.checkpoint_before for c in due):
            self.checkpoint("before a command")  # the state the change can roll back to
        # In the order sent: an evaluate or a checkpoint sees the changes sent before it
        # and none of those sent after it, even when they share this boundary.
        for segment in _up_to_each_action(due):
            applied = self.steering.apply(segment, state.step)
            self._confirm(applied.outcomes, replaying)
            for command in applied.evaluate:
                if self._evaluate_now(command, replaying):
                    return True
            for command in applied.checkpoint:
                if not replaying:
                    self._checkpoint_now(command)
            if applied.ending is not None:
                state.stop_reason = _STOP_REASONS[applied.ending.type]
                state.stop_command = applied.ending
                return True
        return False

    def _confirm(self, outcomes: list[CommandOutcome], replaying: bool) -> None:
        # A replayed command was confirmed by the run that first applied it.
        if not replaying:
            for outcome in outcomes:
                self.io.command_done(outcome)

    def _outcome(self, command: Command, *, result: dict[str, Any] | None = None,
                 reason: str | None = None) -> CommandOutcome:
        return CommandOutcome(command=command, status="rejected" if reason else "applied",
                              step=None if reason else self.state.step, at=time.time(),
                              result=result or {}, reason=reason)

    def _evaluate_now(self, command: Command, replaying: bool) -> bool:
        """A validation pass at this step; the rules look at it. True: stop training."""
        if self._evaluate is None:
            self._confirm([self._outcome(command, reason="the job has no validation data "
                                         "(data.val)")], replaying)
            return False
        raw, values = self._validate_and_publish()
        self._confirm([self._outcome(command, result={"values": values})], replaying)
        fired = self.steering.observe(self.state.step, {**self.state.last_metrics, **raw},
                                      values["lr"], validation=True)
        return self._carry_out([], fired, replaying) if fired else False

    def _validate_and_publish(self) -> tuple[dict[str, float], dict[str, float]]:
        """A validation pass now, published as metrics with the lr in effect (non-finite
        values left out of what is published): (all values, published values)."""
        assert self._evaluate is not None
        raw = self._evaluate()
        values = {k: v for k, v in raw.items() if math.isfinite(v)}
        values["lr"] = self._current_lr()
        self._emit_metrics(values)
        return raw, values

    def _checkpoint_now(self, command: Command) -> None:
        try:
            saved = self.checkpoint("command", wait=True)
        except Exception as exc:  # noqa: BLE001 - refused with the reason, training goes on
            saved, why = False, f"{type(exc).__name__}: {exc}"
        else:
            why = "the checkpoint was not written (lease lost)"
        self.io.command_done(self._outcome(command, result={"checkpoint_step": self.state.step})
                             if saved else self._outcome(command, reason=why))

    # -- loop hooks --------------------------------------------------------------------
    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self._view = estimator
        self._replay_due()
        # Commands requested while the job waited in the queue take effect before step 1.
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
        # every value once (reading a metric costs microseconds a fast epoch feels): the
        # rules see them all, the points and events only the finite ones
        seen = metric_values("train", list(getattr(estimator, "train_metrics", [])),
                             finite=False)
        seen.update(metric_values("val", list(getattr(estimator, "val_metrics", [])),
                                  finite=False))
        values = {name: value for name, value in seen.items() if math.isfinite(value)}
        values["lr"] = self._trained_lr()
        state.epoch += 1
        state.batch_index = 0
        self._emit_metrics(values, epoch=state.epoch - 1, epoch_end=True)
        if state.stop_reason is not None:
            return True
        fired = self.steering.observe(state.step, seen, values["lr"], validation=True)
        return self.follow_commands(fired)

    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        # However fast the job, the last epoch's values reach the live stream.
        if self._pending_epoch_event is not None and self.io.still_owner():
            self.io.publish(self._pending_epoch_event())
        self._pending_epoch_event = None

    # -- helpers -----------------------------------------------------------------------
    def _trained_lr(self) -> float:
        """The lr the last step trained with. An lr change applied at that step's boundary
        (just before the epoch's end) takes effect from the next step, so the epoch's metrics,
        labelled with this step, must not show it."""
        taken = self._boundary_lr
        if taken is not None and taken[0] == self.state.step:
            return taken[1]
        return self._current_lr()

    def _boundary(self, estimator: Any) -> bool:
        """The work of one due step boundary, in a fixed order: publish, a guard's check,
        follow commands, checkpoint, then re-apply commands the next step must see."""
        state = self.state
        if state.step % self.log_every == 0 and (
            time.monotonic() - self._last_publish >= self.pacing.min_publish_interval
        ):
            self._publish_train_metrics(estimator)
        self._boundary_lr = (state.step, self._current_lr())
        fired: list[Command] = []
        if self.steering.next_check(state.step - 1) == state.step:
            running = metric_values("train", list(getattr(estimator, "train_metrics", [])),
                                    finite=False)
            fired = self.steering.observe(state.step, running, self._boundary_lr[1],
                                          validation=False)
        if self.follow_commands(fired):
            return True
        if self.checkpoint_every and state.step - self._last_checkpoint_step >= (
            self.checkpoint_every
        ) and (time.monotonic() - self._last_checkpoint_time
               >= self.pacing.checkpoint_min_interval):
            self.checkpoint("interval")
        if self._replay_due():
            return True
        self._schedule()
        return False

    def _replay_due(self) -> bool:
        """Re-apply the commands the next step must see; True if one stopped training."""
        if self._replay is None:
            return False
        commands, self._next_replay = self._replay(self.state.step + 1)
        return bool(commands) and self._carry_out(commands, [], replaying=True)

    def _schedule(self) -> None:
        """Find the next step whose boundary has work: a metric publish, a checkpoint
        (re-checked every ``log_every`` steps while its time floor holds it back), a
        command to replay before the step after it, or a guard's check."""
        step = self.state.step
        due = (step // self.log_every + 1) * self.log_every
        checkpoint_due = self._last_checkpoint_step + self.checkpoint_every
        if self.checkpoint_every and checkpoint_due > step:
            due = min(due, checkpoint_due)
        # (an overdue checkpoint is being held back by its time floor: the log_every
        # boundaries re-check it, so the loop does not look at the clock every step)
        if self._next_replay is not None:
            due = min(due, max(self._next_replay - 1, step + 1))
        check = self.steering.next_check(step)
        if check is not None:
            due = min(due, check)
        self._due_step = due

    def checkpoint(self, reason: str, wait: bool = False) -> bool:
        ok = self._save_checkpoint(reason, wait=wait)
        if ok:
            self._last_checkpoint_step = self.state.step
            self._last_checkpoint_time = time.monotonic()
        return bool(ok)

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
        # built when sent: most epoch-end events of a fast job are held back and replaced
        event = partial(MetricEvent, step=state.step, epoch=epoch, epochs_done=state.epoch,
                        time=time.time(), values=values)
        if not epoch_end:
            self.io.publish(event())
        elif now - self._last_epoch_publish >= self.pacing.min_publish_interval:
            self._last_epoch_publish = now
            self._pending_epoch_event = None
            self.io.publish(event())
        else:
            self._pending_epoch_event = event
        self.io.record_metrics(state.step, epoch, values)
        self.io.record_progress(state.step, state.epoch, values["lr"], dict(state.last_metrics))
