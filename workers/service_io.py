"""JobIO over core's Redis channel and DB: a control listener and an outbox thread.

The training thread never waits on Redis or the DB per batch:

- :class:`ControlListener` blocks on the job's control stream (XREAD BLOCK) in its own
  thread and drops commands into a queue; the loop checks that queue at each step
  boundary, so a command takes effect at most one step after it arrives.
- :class:`ServiceIO` hands events and metric points to an outbox thread that publishes
  them to the events stream at once and writes metric points to the DB in batches.

Every write checks the lease first: a worker that lost its job stops talking (fencing).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import redis

from core import repositories as repo
from core.channel import STREAM_START, Channel
from core.db import session_scope
from core.events import Command, JobEvent, LREvent
from core.models import utcnow

log = logging.getLogger(__name__)

METRIC_FLUSH_SECONDS = 1.0
OUTBOX_BATCH = 256


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
                 listener: ControlListener) -> None:
        self.channel = channel
        self.job_id = job_id
        self._still_owner = still_owner
        self.listener = listener
        self.wake = listener.wake
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

    def lr_applied(self, event: LREvent) -> None:
        self._send("lr", event)

    def lr_rejected(self, event: LREvent) -> None:
        self._send("lr", event)

    def checkpoint_saved(self, step: int, epoch: int, key_prefix: str, files: dict[str, Any],
                         size: int, sha256: str, pruned: list[int]) -> bool:
        # Synchronous (on the checkpoint upload thread): the row exists once this returns.
        if not self.still_owner():
            return False
        with session_scope() as session:
            repo.add_checkpoint(session, job_id=self.job_id, step=step, epoch=epoch,
                                key_prefix=key_prefix, files=files)
            repo.delete_checkpoints(session, job_id=self.job_id, steps=pruned)
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
        """Block until everything handed over so far is written."""
        done = threading.Event()
        self._outbox.put(("flush", done))
        done.wait(timeout=30)

    def close(self) -> None:
        self.flush()
        self._outbox.put(None)
        self._thread.join(timeout=10)

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
            if time.monotonic() - last_db_write >= METRIC_FLUSH_SECONDS:
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
        if kind == "lr":
            self._write_db()  # progress recorded before the change must not win
            self._write_lr(payload)
        elif kind in ("flush", "tick"):
            self._write_db()

    def _write_lr(self, event: LREvent) -> None:
        """The DB row first (the api answers GET learning-rate from it), then the event."""
        if not self.still_owner():
            return
        with session_scope() as session:
            if event.status == "rejected":
                repo.mark_lr_change_rejected(session, change_id=event.change_id,
                                             reason=event.reason or "rejected")
            else:
                assert event.applied_step is not None and event.applied_at is not None
                repo.mark_lr_change_applied(
                    session, change_id=event.change_id, applied_step=event.applied_step,
                    applied_lr=event.learning_rate,
                    applied_at=datetime.fromtimestamp(event.applied_at, UTC),
                )
                repo.set_current_lr(session, job_id=self.job_id,
                                    learning_rate=event.learning_rate)
        self.channel.publish(self.job_id, event)

    def _write_db(self) -> None:
        with self._lock:
            recorded, self._points = self._points, []
            progress, self._progress = self._progress, None
        if not (recorded or progress) or not self.still_owner():
            return
        points = [repo.MetricPointIn(step=step, epoch=epoch, name=name, value=value, time=at)
                  for step, epoch, values, at in recorded for name, value in values.items()]
        with session_scope() as session:
            if points:
                repo.add_metric_points(session, job_id=self.job_id, points=points)
            if progress:
                repo.update_job_progress(session, job_id=self.job_id, **progress)
