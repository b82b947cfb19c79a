"""Worker DB writes that must not be lost: retried with backoff, spooled to a local file.

A database outage (a restart, a fail-over, a killed connection, a lock held past the busy
timeout) must cost a running job time, never data. Two kinds of write need this:

- the outbox's stream of metric points and command confirmations (:class:`WriteSpool`): kept
  in order in memory and mirrored to a JSON-lines file while the DB refuses them, retried
  with exponential backoff, and flushed in their original order once it answers. Inserts
  are idempotent (``add_metric_points`` ignores an existing (job, name, step); marking a
  command applied is a compare-and-set), so a batch whose commit succeeded but whose reply
  was lost can be sent again without duplicating anything;
- one-shot writes such as the job's final status (:func:`retry_db`): retried until they
  land or a deadline passes, so a job never stays ``running`` just because the DB blinked
  when it finished.

The spool file lets a worker process that dies during an outage hand the points it had
not stored to the next run of the job on the same host (resume re-creates the points
after the checkpoint, not those before it). Only plain JSON is written; nothing pickled.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import exc as sa_exc

from core import repositories as repo
from core.commands import CommandOutcome, SetLRCommand
from core.events import LREvent

log = logging.getLogger(__name__)

T = TypeVar("T")

FIRST_DELAY_SECONDS = 0.1
MAX_DELAY_SECONDS = 5.0


def is_transient_db_error(error: BaseException) -> bool:
    """Errors that say "the database is not answering now", not "this write is wrong".

    A constraint violation or a malformed statement fails again however often it is
    retried; a dropped connection, a locked SQLite file or an exhausted pool do not.
    """
    if isinstance(error, sa_exc.DBAPIError):
        return bool(error.connection_invalidated) or isinstance(
            error, (sa_exc.OperationalError, sa_exc.InterfaceError)
        )
    return isinstance(error, sa_exc.TimeoutError)  # the connection pool's checkout timeout


class Backoff:
    """Exponential backoff between attempts: 0.1 s doubling to a cap of 5 s."""

    def __init__(self, first: float = FIRST_DELAY_SECONDS, cap: float = MAX_DELAY_SECONDS):
        self.first = first
        self.cap = cap
        self.failures = 0
        self._next_attempt = 0.0

    @property
    def delay(self) -> float:
        return 0.0 if self.failures == 0 else min(self.cap, self.first * 2 ** (self.failures - 1))

    def failed(self) -> float:
        self.failures += 1
        self._next_attempt = time.monotonic() + self.delay
        return self.delay

    def succeeded(self) -> None:
        self.failures = 0
        self._next_attempt = 0.0

    def ready(self) -> bool:
        return time.monotonic() >= self._next_attempt

    def wait_seconds(self) -> float:
        return max(0.0, self._next_attempt - time.monotonic())


def retry_db(write: Callable[[], T], *, what: str, deadline_seconds: float) -> T:
    """``write()`` (one transaction) until it succeeds; transient DB errors are retried with
    backoff for up to ``deadline_seconds``, then the last one is raised."""
    backoff = Backoff()
    give_up_at = time.monotonic() + deadline_seconds
    while True:
        try:
            return write()
        except Exception as error:
            if not is_transient_db_error(error):
                raise
            delay = backoff.failed()
            if time.monotonic() + delay > give_up_at:
                log.error("%s: database still failing after %d attempts; giving up: %s",
                          what, backoff.failures, error)
                raise
            log.warning("%s: database error (attempt %d), retrying in %.1fs: %s", what,
                        backoff.failures, delay, error)
            time.sleep(delay)


# ------------------------------------------------------------------------ the spool


@dataclass(frozen=True)
class PointsBatch:
    points: list[repo.MetricPointIn]


@dataclass(frozen=True)
class CommandConfirmation:
    """A command's outcome at a step: its row is marked (a rule's is inserted first)."""

    outcome: CommandOutcome


@dataclass(frozen=True)
class ProgressUpdate:
    """Where the job stands (the job row's step, epoch, lr, latest metrics)."""

    step: int
    epoch: int
    current_lr: float
    latest_metrics: dict[str, float]


SpoolRecord = PointsBatch | CommandConfirmation | ProgressUpdate


def default_spool_dir() -> Path:
    return Path(tempfile.gettempdir()) / "rudder-worker-spool"


_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]")


class WriteSpool:
    """The outbox's DB writes that are not committed yet, oldest first.

    ``add`` queues a record; ``drain(write)`` hands records to ``write`` one at a time in
    order and stops at the first transient failure (the rest wait for the backoff);
    ``persist()`` mirrors the backlog (less progress updates) to ``<dir>/<job>.jsonl`` so it
    outlives the process.
    A new spool for the same job starts with what that file holds.
    """

    def __init__(self, job_id: str, directory: Path | None) -> None:
        self.job_id = job_id
        name = _SAFE_NAME.sub("_", job_id)
        self.path = None if directory is None else directory / f"{name}.jsonl"
        self.backoff = Backoff()
        self._records: list[SpoolRecord] = []
        self._persisted = True  # the file (or its absence) matches the backlog
        self.failures = 0  # transient failures seen, for logs and tests
        self._load()

    def __len__(self) -> int:
        return len(self._records)

    def add(self, record: SpoolRecord) -> None:
        if isinstance(record, ProgressUpdate) and self._records and isinstance(
                self._records[-1], ProgressUpdate):
            self._records[-1] = record  # only the newest position matters
        else:
            self._records.append(record)
        self._persisted = False

    def drain(self, write: Callable[[SpoolRecord], None]) -> bool:
        """Write the backlog in order; True when it is empty afterwards."""
        if not self._records:
            return True
        if not self.backoff.ready():
            return False
        while self._records:
            try:
                write(self._records[0])
            except Exception as error:
                if not is_transient_db_error(error):
                    # A permanent refusal would block every later write: drop this record
                    # (loudly) and go on; retrying cannot make it succeed.
                    log.exception("job %s: the database refused a %s; dropped", self.job_id,
                                  type(self._records.pop(0)).__name__)
                    self._persisted = False
                    continue
                self.failures += 1
                delay = self.backoff.failed()
                log.warning("job %s: database write failed (%d records waiting), retrying in "
                            "%.1fs: %s", self.job_id, len(self._records), delay, error)
                return False
            self._records.pop(0)
            self._persisted = False
        self.backoff.succeeded()
        return True

    def discard(self) -> None:
        """Forget everything (the job is no longer ours: the new owner re-sends)."""
        self._records.clear()
        self._persisted = False
        self.persist()

    def persist(self) -> None:
        """Make the file hold exactly the backlog (no file when it is empty)."""
        if self._persisted or self.path is None:
            return
        # Progress is not kept: it is stale by the time another run reads the file, and
        # that run reports its own.
        kept = [_encode(r) for r in self._records if not isinstance(r, ProgressUpdate)]
        if not kept:
            self.path.unlink(missing_ok=True)
            self._persisted = True
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lines = "".join(json.dumps(body) + "\n" for body in kept)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-", suffix=".part")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(lines)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._persisted = True

    def _load(self) -> None:
        if self.path is None or not self.path.is_file():
            return
        try:
            for line in self.path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    self._records.append(_decode(json.loads(line)))
        except (OSError, ValueError, KeyError, TypeError) as error:
            log.error("job %s: unreadable spool file %s ignored: %s", self.job_id, self.path,
                      error)
            return
        log.info("job %s: %d spooled writes from an earlier run will be sent first",
                 self.job_id, len(self._records))


def _encode(record: PointsBatch | CommandConfirmation) -> dict[str, Any]:
    if isinstance(record, PointsBatch):
        return {"kind": "points", "points": [
            [p.step, p.epoch, p.name, p.value, None if p.time is None else p.time.isoformat()]
            for p in record.points]}
    return {"kind": "command", "outcome": record.outcome.model_dump(mode="json")}


def _decode(body: dict[str, Any]) -> SpoolRecord:
    if body["kind"] == "points":
        return PointsBatch([
            repo.MetricPointIn(step=int(step), epoch=int(epoch), name=str(name),
                               value=float(value),
                               time=None if at is None else datetime.fromisoformat(at))
            for step, epoch, name, value, at in body["points"]])
    if body["kind"] == "command":
        return CommandConfirmation(CommandOutcome.model_validate(body["outcome"]))
    if body["kind"] == "lr":  # written by a worker from before step-boundary commands
        return CommandConfirmation(_lr_outcome(LREvent.model_validate(body["event"])))
    raise ValueError(f"unknown spool record kind {body['kind']!r}")


def _lr_outcome(event: LREvent) -> CommandOutcome:
    command = SetLRCommand(command_id=event.change_id, learning_rate=event.learning_rate,
                           mode=event.mode)
    return CommandOutcome(command=command, status=event.status, step=event.applied_step,
                          at=event.applied_at, reason=event.reason,
                          result={"learning_rate": event.learning_rate})
