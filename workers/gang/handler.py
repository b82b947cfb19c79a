"""The step-boundary handler of one rank of a distributed job.

It is :class:`workers.hooks.ServiceHandler` with one change of where decisions come from:
at every boundary all ranks meet in :class:`~workers.gang.link.Link`'s exchange. Rank 0
polls the control stream and decides (deduplication, the rules' commands) before it; the
decided list rides in the exchange, and every rank then applies exactly that list to its
own trainer at that boundary (``_apply_due``, which reads and writes nothing outside the
process). So a learning-rate change, a pause or a cancel takes effect at the same step on
every rank, and the confirmation, sent by rank 0 one boundary later, lists for each rank
the first step it ran with it (``result.rank_steps``).

The exchange also sums the training metrics over the ranks: what rank 0 publishes, and
what its rules look at, is the loss and accuracy over the global batch. A rule that fires
between exchanges (a guard's check, an evaluate command) is decided at the next boundary.
Only rank 0 writes (metrics, confirmations, checkpoints); the other ranks' I/O is a
:class:`NullIO`.
"""

from __future__ import annotations

import math
import threading
import time
import zlib
from dataclasses import dataclass
from typing import Any

import engine.metric
import engine.random
from core.commands import Command, CommandOutcome
from core.events import JobEvent, LogEvent
from workers.gang.link import Agreed, Contribution, Link
from workers.hooks import (
    STOP_LEASE_LOST,
    STOP_SHUTDOWN,
    ServiceHandler,
    metric_values,
    shutdown_requested,
)


class NullIO:
    """The I/O of a rank other than 0: it reads nothing and writes nothing."""

    def __init__(self) -> None:
        self.wake = threading.Event()

    def still_owner(self) -> bool:
        return True

    def publish(self, event: JobEvent) -> None:
        pass

    def record_metrics(self, step: int, epoch: int, values: dict[str, float]) -> None:
        pass

    def record_progress(self, step: int, epoch: int, learning_rate: float,
                        metrics: dict[str, float]) -> None:
        pass

    def command_done(self, outcome: CommandOutcome) -> None:
        pass

    def checkpoint_saved(self, *args: Any, **kwargs: Any) -> bool:
        return True

    def poll_commands(self) -> list[Command]:
        return []

    def flush(self) -> None:
        pass


def _summable(metric: Any) -> bool:
    """A metric whose value is sum_metric / num_inst (loss, accuracy, cross-entropy, ...):
    summing both over the ranks gives the value over the global batch."""
    kind = type(metric)
    return kind.get is engine.metric.EvalMetric.get and \
        kind.get_name_value is engine.metric.EvalMetric.get_name_value


class _GlobalMetric:
    """A training metric as the sum over all ranks (what the handler reads)."""

    def __init__(self, local: Any) -> None:
        self.local = local
        self.total = 0.0
        self.count = 0.0

    def get_name_value(self) -> list[tuple[str, float]]:
        if not _summable(self.local):
            return list(self.local.get_name_value())  # rank 0's own value
        value = self.total / self.count if self.count else math.nan
        return [(self.local.name, value)]


@dataclass(frozen=True)
class _GlobalView:
    train_metrics: list[Any]
    val_metrics: list[Any]


class GangHandler(ServiceHandler):
    """:class:`ServiceHandler` for rank ``link.rank`` of ``link.size``."""

    def __init__(self, io: Any, state: Any, *, link: Link, train_metrics: list[Any],
                 samples_per_step: int, **kwargs: Any) -> None:
        super().__init__(io, state, **kwargs)
        self.link = link
        self.rank = link.rank
        self._global = [_GlobalMetric(m) for m in train_metrics]
        self._samples_per_step = samples_per_step  # this rank's batch (a full one)
        self._deferred: list[Command] = []  # rank 0: rules fired between exchanges
        self._agreed: Agreed | None = None  # this boundary's, when already exchanged
        self._held: list[CommandOutcome] = []  # rank 0: confirmed at the next exchange
        self._applied_step: int | None = None
        self._rate = 0.0
        self._rates: list[float] = [0.0] * link.size
        self._last_exchange = time.perf_counter()
        self.digests: list[int] = []  # every rank's weights digest, after the closing one

    # -- the exchange --------------------------------------------------------------------
    def _contribution(self, digest: int = 0) -> Contribution:
        commands: list[Command] = []
        lease_lost = False
        if self.rank == 0:
            woken = self.io.wake.is_set()  # a command arrived (or the lease went)
            if woken:
                self.io.wake.clear()  # before draining: one arriving now sets it again
            lease_lost = not self.io.still_owner()
            rules, self._deferred = self._deferred, []
            received = self.io.poll_commands() if woken and not lease_lost else []
            if received or rules:
                commands, refused = self.steering.due(received, self.state.step, rules)
                for outcome in refused:
                    self.io.command_done(outcome)
        sums = [(float(m.local.sum_metric), float(m.local.num_inst)) if _summable(m.local)
                else (0.0, 0.0) for m in self._global]
        return Contribution(commands=commands, lease_lost=lease_lost,
                            shutdown=shutdown_requested.is_set(),
                            applied_step=self._applied_step,
                            samples_per_second=self._rate, digest=digest, metric_sums=sums)

    def exchange(self, digest: int = 0) -> Agreed:
        now = time.perf_counter()
        elapsed = now - self._last_exchange
        if elapsed > 0:  # a smoothed rate: one step's time is noisy
            rate = self._samples_per_step / elapsed
            self._rate = rate if self._rate == 0 else 0.8 * self._rate + 0.2 * rate
        agreed = self.link.exchange(self._contribution(digest))
        self._last_exchange = time.perf_counter()
        for metric, (total, count) in zip(self._global, agreed.metric_sums, strict=True):
            metric.total, metric.count = total, count
        self._rates = agreed.samples_per_second
        self._release_held(agreed)
        return agreed

    def _release_held(self, agreed: Agreed) -> None:
        """Rank 0 confirms what the previous boundary applied, with each rank's step."""
        if self.rank != 0 or not self._held:
            return
        held, self._held = self._held, []
        steps = agreed.applied_steps
        for outcome in held:
            result = {**outcome.result, "ranks": self.link.size, "rank_steps": steps}
            self.io.command_done(outcome.model_copy(update={"result": result}))

    def _confirm(self, outcomes: list[CommandOutcome], replaying: bool) -> None:
        if replaying or self.rank != 0:
            return
        for outcome in outcomes:
            if outcome.status == "applied":
                self._held.append(outcome)
            else:
                self.io.command_done(outcome)

    def _carry_agreed(self, agreed: Agreed) -> bool:
        state = self.state
        if agreed.lease_lost:
            state.stop_reason = STOP_LEASE_LOST
            return True
        if agreed.shutdown:
            state.stop_reason = STOP_SHUTDOWN
            return True
        if not agreed.commands:
            return False
        if self.rank != 0:
            self.steering.due(agreed.commands, state.step)  # remembered as seen, as on 0
        self._applied_step = state.step + 1  # the first step that runs with them
        return self._apply_due(agreed.commands)

    # -- hooks -----------------------------------------------------------------------------
    def follow_commands(self, rules: list[Command] | None = None) -> bool:
        if rules and self.rank == 0:
            self._deferred.extend(rules)
        agreed, self._agreed = self._agreed, None
        return self._carry_agreed(agreed if agreed is not None else self.exchange())

    def _global_view(self, estimator: Any) -> _GlobalView:
        return _GlobalView(self._global, list(getattr(estimator, "val_metrics", [])))

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self._last_exchange = time.perf_counter()
        super().train_begin(self._global_view(estimator))

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        state = self.state
        state.step += 1
        state.batch_index += 1
        self._agreed = self.exchange()  # every boundary: the others wait for it
        return self._boundary(self._global_view(estimator))

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        # The ranks share one RNG stream (the same seed, the same draws) until an epoch's
        # last batch splits unevenly and Dropout draws differ: from here on rank 0's state
        # is every rank's again, the one its checkpoints hold.
        shared = self.link.share_json(engine.random.get_state() if self.rank == 0 else None)
        if self.rank != 0:
            engine.random.set_state(shared)
        return super().epoch_end(self._global_view(estimator))

    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        super().train_end(self._global_view(estimator))

    def close(self, params: list[Any]) -> None:
        """The closing exchange (every rank, after the loop): confirm what is held, and
        compare the ranks' weights."""
        digest = 0
        for param in params:
            digest = zlib.crc32(param.data().asnumpy().tobytes(), digest)
        self.digests = self.exchange(digest).digests
        if self.rank == 0 and self.io.still_owner() and len(set(self.digests)) > 1:
            self.io.publish(LogEvent(level="error", message=(
                f"the ranks' weights differ at step {self.state.step}: crc32 "
                f"{', '.join(f'{d:08x}' for d in self.digests)}")))

    # -- rank 0's extras -------------------------------------------------------------------
    def _publish_train_metrics(self, estimator: Any) -> None:
        values = metric_values("train", list(getattr(estimator, "train_metrics", [])))
        values["lr"] = self._current_lr()
        for rank, rate in enumerate(self._rates):
            values[f"throughput_rank{rank}"] = round(rate, 1)
        self._emit_metrics(values)

    def _evaluate_now(self, command: Command, replaying: bool) -> bool:
        """Rank 0 validates; what the rules decide on it waits for the next exchange."""
        if self.rank != 0:
            return False
        if self._evaluate is None:
            self._confirm([self._outcome(command, reason="the job has no validation data "
                                         "(data.val)")], replaying)
            return False
        raw, values = self._validate_and_publish()
        if not replaying:
            self.io.command_done(self._outcome(command, result={"values": values}))
        self._deferred.extend(self.steering.observe(
            self.state.step, {**self.state.last_metrics, **raw}, values["lr"],
            validation=True))
        return False
