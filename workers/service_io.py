"""JobIO over core's Redis channel and DB: a control listener and an outbox thread.

The training thread never waits on Redis or the DB per batch:

- :class:`ControlListener` blocks on the job's control stream (XREAD BLOCK) in its own
  thread and drops commands into a queue; the loop checks that queue at each step
  boundary, so a command takes effect at most one step after it arrives.
- :class:`ServiceIO` hands events and metric points to an outbox thread that publishes
  them to the events stream at once and writes metric points to the DB in batches.

DB writes go through a :class:`~workers.db_retry.WriteSpool`: while the database refuses
them they wait, in order, in memory and in a local spool file, and are retried with
backoff; nothing is dropped (README: every epoch's points are stored).

Every write checks the lease first: a worker that lost its job stops talking (fencing).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from sqlalchemy.orm import Session

from core import repositories as repo
from core.channel import STREAM_START, Channel
from core.commands import Command, CommandOutcome
from core.db import session_scope
from core.events import JobEvent
from core.models import utcnow
from core.steering import outcome_event
from workers.db_retry import (
    CommandConfirmation,
    PointsBatch,
    ProgressUpdate,
    SpoolRecord,
    WriteSpool,
    retry_db,
)

log = logging.getLogger(__name__)

METRIC_FLUSH_SECONDS = 1.0
LR_KINDS = ("set_lr", "set_schedule")  # commands whose result is the lr now in effect
OUTBOX_BATCH = 256
# How long the last writes of a run (and a checkpoint's row) are retried while the
# database is down before the worker gives up on them (the spool file keeps the points).
DB_RETRY_SECONDS = 120.0


class ControlListener:
    """Reads the control stream in a daemon thread; ``drain()`` never blocks."""

    def __init__(self, channel: Channel, job_id: str, after: str = STREAM_START,
                 block_ms: int = 250) -> None:
        self._channel = channel
        self._job_id = job_id
        self._after = after
        self._block_ms = block_ms
        self._queue: queue.SimpleQueue[Command] = queue.SimpleQueue()
        # Set with every command: the loop checks this one flag per step.
        self.wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"control:{job_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self._block_ms / 1000 + 2)

    def push(self, command: Command) -> None:
        self._queue.put(command)
        self.wake.set()

    def drain(self) -> list[Command]:
        commands: list[Command] = []
        while not self._queue.empty():
            commands.append(self._queue.get_nowait())
        return commands

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                received, self._after = self._channel.wait_commands(
                    self._job_id, after=self._after, block_ms=self._block_ms
                )
            except redis.RedisError as exc:
                log.warning("control stream read failed: %r; retrying", exc)
                self._stop.wait(0.5)
                continue
            for entry in received:
                self.push(entry.command)


class ServiceIO:
    """The production :class:`~workers.jobio.JobIO`: Redis events + batched DB writes."""

    def __init__(self, channel: Channel, job_id: str, still_owner: Callable[[], bool],
                 listener: ControlListener, *, spool_dir: Path | None = None,
                 db_retry_seconds: float = DB_RETRY_SECONDS) -> None:
        self.channel = channel
        self.job_id = job_id
        self._still_owner = still_owner
        self.listener = listener
        self.wake = listener.wake
        self.db_retry_seconds = db_retry_seconds
        # Owned by the outbox thread (checkpoint rows use retry_db on their own thread).
        self.spool = WriteSpool(job_id, spool_dir)
        self._outbox: queue.SimpleQueue[tuple[str, Any] | None] = queue.SimpleQueue()
        self._points: list[tuple[int, int, dict[str, float], datetime]] = []
        self._progress: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._idle = threading.Event()
        self._idle.set()
        self._thread = threading.Thread(target=self._run, name=f"outbox:{job_id}", daemon=True)
        self._thread.start()

    # -- JobIO -------------------------------------------------------------------------
    def still_owner(self) -> bool:
        return self._still_owner()

    def publish(self, event: JobEvent) -> None:
        self._send("event", event)

    def record_metrics(self, step: int, epoch: int, values: dict[str, float]) -> None:
        # Only a reference is kept here; the rows are built on the outbox thread.
        with self._lock:
            self._points.append((step, epoch, values, utcnow()))  # measured now

    def record_progress(self, step: int, epoch: int, learning_rate: float,
                        metrics: dict[str, float]) -> None:
        with self._lock:
            self._progress = {"step": step, "epoch": epoch, "current_lr": learning_rate,
                              "latest_metrics": metrics}

    def command_done(self, outcome: CommandOutcome) -> None:
        self._send("command", outcome)

    def checkpoint_saved(self, step: int, epoch: int, key_prefix: str, files: dict[str, Any],
                         size: int, sha256: str, pruned: list[int]) -> bool:
        # Synchronous (on the checkpoint upload thread): the row exists once this returns.
        if not self.still_owner():
            return False

        def record() -> None:
            with session_scope() as session:
                repo.add_checkpoint(session, job_id=self.job_id, step=step, epoch=epoch,
                                    key_prefix=key_prefix, files=files)
                repo.delete_checkpoints(session, job_id=self.job_id, steps=pruned)

        retry_db(record, what=f"job {self.job_id} checkpoint row at step {step}",
                 deadline_seconds=self.db_retry_seconds)
        try:
            self.channel.publish_checkpoint(self.job_id, step=step, epoch=epoch,
                                            sha256=sha256, size=size)
        except redis.RedisError:
            # The row is the record and it is written: a shutdown checkpoint taken while
            # Redis is away (restarting) must still count.
            log.warning("checkpoint %d of job %s saved; its event was not published",
                        step, self.job_id, exc_info=True)
        return True

    def poll_commands(self) -> list[Command]:
        return self.listener.drain()

    def flush(self) -> None:
        """Block until everything handed over so far is stored: in the DB, or in the spool
        file while the DB is down."""
        done = threading.Event()
        self._outbox.put(("flush", done))
        done.wait(timeout=30)

    def close(self) -> None:
        """Flush, then keep retrying what the DB has not taken for up to
        ``db_retry_seconds`` (what is still refused then stays in the spool file)."""
        self.flush()
        self._outbox.put(None)
        self._thread.join(timeout=self.db_retry_seconds + 30)

    # -- outbox thread -----------------------------------------------------------------
    def _send(self, kind: str, payload: Any) -> None:
        self._outbox.put((kind, payload))

    def _run(self) -> None:
        last_db_write = time.monotonic()
        while True:
            try:
                items = [self._outbox.get(timeout=METRIC_FLUSH_SECONDS)]
            except queue.Empty:
                items = [("tick", None)]
            # Whatever else is waiting goes out with it: one Redis round trip for a run of
            # events instead of one each (less time holding the GIL the loop needs).
            while len(items) < OUTBOX_BATCH:
                try:
                    items.append(self._outbox.get_nowait())
                except queue.Empty:
                    break
            events: list[JobEvent] = []
            for item in items:
                if item is None:
                    self._guarded("events", self._publish, events)
                    self._guarded("points", self._write_db)
                    self._guarded("backlog", self._drain_until_empty)
                    return
                kind, payload = item
                if kind == "event":
                    events.append(payload)
                    continue
                self._guarded("events", self._publish, events)  # keep the stream in order
                events = []
                self._guarded(kind, self._handle, kind, payload)
                if kind == "flush":
                    payload.set()
            self._guarded("events", self._publish, events)
            if time.monotonic() - last_db_write >= METRIC_FLUSH_SECONDS or (
                    len(self.spool) and self.spool.backoff.ready()):
                self._guarded("points", self._write_db)
                last_db_write = time.monotonic()

    def _guarded(self, what: str, write: Callable[..., None], *args: Any) -> None:
        try:
            write(*args)
        except Exception:  # noqa: BLE001 - a lost event must not kill the job
            log.exception("outbox failed to write %s for job %s", what, self.job_id)

    def _publish(self, events: list[JobEvent]) -> None:
        if events and self.still_owner():
            self.channel.publish_many(self.job_id, events)

    def _handle(self, kind: str, payload: Any) -> None:
        if kind == "command":
            self._take_points()  # progress recorded before the change must not win
            self.spool.add(CommandConfirmation(payload))
            self._drain()
        elif kind in ("flush", "tick"):
            self._write_db()

    def _write_db(self) -> None:
        self._take_points()
        self._drain()

    def _take_points(self) -> None:
        """Move what the loop recorded into the spool, in the order it was recorded."""
        with self._lock:
            recorded, self._points = self._points, []
            progress, self._progress = self._progress, None
        points = [repo.MetricPointIn(step=step, epoch=epoch, name=name, value=value, time=at)
                  for step, epoch, values, at in recorded for name, value in values.items()]
        if points:
            self.spool.add(PointsBatch(points))
        if progress:
            self.spool.add(ProgressUpdate(**progress))

    def _drain(self) -> bool:
        """Send the spool's backlog in order; what the DB refuses waits in the spool file."""
        if not self.still_owner():
            self.spool.discard()  # the new owner re-sends from its checkpoint
            return True
        empty = self.spool.drain(self._write_record)
        self.spool.persist()
        return empty

    def _drain_until_empty(self) -> None:
        give_up_at = time.monotonic() + self.db_retry_seconds
        while not self._drain():
            if time.monotonic() + self.spool.backoff.wait_seconds() > give_up_at:
                log.error("job %s: %d writes still refused by the database; they stay in %s",
                          self.job_id, len(self.spool), self.spool.path)
                return
            time.sleep(self.spool.backoff.wait_seconds())

    def _write_record(self, record: SpoolRecord) -> None:
        store_record(self.channel, self.job_id, record)


def store_record(channel: Channel, job_id: str, record: SpoolRecord) -> None:
    """One spooled write, in its own transaction (retried whole; idempotent)."""
    with session_scope() as session:
        if isinstance(record, PointsBatch):
            repo.add_metric_points(session, job_id=job_id, points=record.points)
        elif isinstance(record, ProgressUpdate):
            repo.update_job_progress(session, job_id=job_id, step=record.step,
                                     epoch=record.epoch, current_lr=record.current_lr,
                                     latest_metrics=record.latest_metrics)
        else:
            record_outcome(session, job_id, record.outcome)
    if isinstance(record, CommandConfirmation):
        try:  # the DB row is the record; the event only tells the live stream
            channel.publish(job_id, outcome_event(record.outcome))
        except redis.RedisError as exc:
            log.warning("job %s: command event not published: %r", job_id, exc)


def record_outcome(session: Session, job_id: str, outcome: CommandOutcome) -> None:
    """The command's row (the api answers from it); the event goes after. A rule's
    command has no row yet: it is inserted first."""
    command = outcome.command
    if command.source == "rule":
        repo.ensure_command(session, job_id=job_id, command=command)
    if outcome.status == "rejected":
        repo.mark_command_rejected(session, command_id=command.command_id,
                                   reason=outcome.reason or "rejected")
        return
    assert outcome.step is not None
    applied_at = None if outcome.at is None else datetime.fromtimestamp(outcome.at, UTC)
    repo.mark_command_applied(session, command_id=command.command_id,
                              applied_step=outcome.step, result=outcome.result,
                              applied_at=applied_at)
    rate = outcome.result.get("learning_rate")
    if command.type in LR_KINDS and isinstance(rate, int | float):
        repo.set_current_lr(session, job_id=job_id, learning_rate=float(rate))


def send_leftover_writes(channel: Channel, job_id: str, spool_dir: Path | None,
                         deadline_seconds: float) -> None:
    """Store what an earlier run of the job on this host spooled and could not write
    before it died, before this run reads the job's commands: a command that run
    applied must be replayed at its step, not applied again as if it were pending."""
    spool = WriteSpool(job_id, spool_dir)
    give_up_at = time.monotonic() + deadline_seconds
    while not spool.drain(lambda record: store_record(channel, job_id, record)):
        spool.persist()
        if time.monotonic() + spool.backoff.wait_seconds() > give_up_at:
            raise TimeoutError(f"job {job_id}: {len(spool)} spooled writes still refused "
                               f"by the database")
        time.sleep(spool.backoff.wait_seconds())
    spool.persist()
