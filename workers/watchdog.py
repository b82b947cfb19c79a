"""Re-queue running jobs whose lease expired (their worker died or hung).

Runs as a daemon thread inside every worker process rather than as Celery beat: the
embedded ``rudder up`` then needs no extra process, and a fleet of workers needs no
singleton scheduler (a dead beat would silently stop recovery). Several watchdogs are safe
together because the re-queue is a compare-and-set on the job's status: exactly one of them
moves a job from running to queued and sends the task.

Ordering that makes "running without a lease" mean "orphaned": a worker takes the lease
*before* it marks the job running, and marks it finished/paused *before* releasing.

Re-queueing writes the job's outbox mark with its status (core.repositories.outbox); each
pass then runs this process's dispatcher (core.dispatch) to send what the outbox holds.
(Queued jobs whose message the broker lost are found by the api processes' dispatchers.)
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime

from core import repositories as repo
from core.channel import Channel
from core.db import session_scope
from core.job_status import transition_and_announce
from core.models import JobStatus
from workers import resources
from workers.datasets.sweep import sweep_datasets
from workers.settings import get_worker_settings

log = logging.getLogger(__name__)
DATASET_SWEEP_SECONDS = 60.0

def sweep(channel: Channel, max_attempts: int | None = None) -> list[str]:
    """One pass: re-queue (or fail, past max attempts) orphaned running jobs. Re-queued
    jobs are in the outbox; the caller dispatches them."""
    if max_attempts is None:
        max_attempts = get_worker_settings().max_attempts
    with session_scope() as session:
        running = repo.running_jobs(session)
    requeued: list[str] = []
    leased = channel.leased_jobs([job_id for job_id, _queue, _started in running])
    for job_id, _queue, started_at in running:
        if job_id in leased:
            continue
        if _settle_unapplied_stop(channel, job_id, started_at):
            continue
        reason = "worker lost (lease expired); re-queued to resume from its latest checkpoint"
        with session_scope() as session:
            moved = transition_and_announce(session, channel, job_id=job_id,
                                            to_status=JobStatus.QUEUED,
                                            from_statuses=[JobStatus.RUNNING], reason=reason)
            attempts = repo.increment_attempts(session, job_id=job_id) if moved else 0
        if not moved:
            continue  # another watchdog, or the worker itself, got there first
        if attempts > max_attempts:
            why = f"worker lost {attempts} times; giving up"
            with session_scope() as session:
                transition_and_announce(session, channel, job_id=job_id,
                                        to_status=JobStatus.FAILED,
                                        from_statuses=[JobStatus.QUEUED], reason=why)
            continue
        requeued.append(job_id)
        log.warning("job %s: lease expired; re-queued (attempt %d)", job_id, attempts)
    return requeued


def _settle_unapplied_stop(channel: Channel, job_id: str, started_at: datetime | None) -> bool:
    """Honour a pause or cancel its lost worker read but never applied.

    A command sent after the job last started running, on a job that is still 'running',
    was not applied (applying it leaves the job paused or cancelled). Re-queueing would
    silently drop it, so the watchdog carries it out instead: the latest complete
    checkpoint stands, and a paused job resumes from it. Stream ids are Redis timestamps
    in milliseconds, which is what makes "sent after it started" a cheap XRANGE.
    """
    if started_at is None:
        return False
    since = f"{int(started_at.timestamp() * 1000)}-0"
    kinds = {command.type for command in channel.read_commands(job_id, after=since, count=1000)}
    target = (JobStatus.CANCELLED if "cancel" in kinds
              else JobStatus.PAUSED if "pause" in kinds else None)
    if target is None:
        return False
    reason = (f"{target.value} (requested while running; its worker was lost before the "
              "command took effect, so the latest checkpoint stands)")
    with session_scope() as session:
        moved = transition_and_announce(session, channel, job_id=job_id, to_status=target,
                                        from_statuses=[JobStatus.RUNNING], reason=reason)
    if moved:
        log.warning("job %s: lease expired with a %s pending; %s", job_id, target.value, reason)
    return True


class Watchdog:
    def __init__(self, channel: Channel, interval_seconds: float) -> None:
        self._channel = channel
        self._interval = interval_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rudder-watchdog", daemon=True)
        self._datasets_swept_at = -DATASET_SWEEP_SECONDS

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self._interval + 5)

    def _sweep_datasets_now_and_then(self) -> None:
        # The job passes run every second for a fast take-over; data-set housekeeping
        # works on a scale of minutes and need not cost a query per second.
        now = time.monotonic()
        if now - self._datasets_swept_at >= DATASET_SWEEP_SECONDS:
            self._datasets_swept_at = now
            sweep_datasets(resources.get_store())

    def _run(self) -> None:
        # The first pass runs at once: a worker started to replace a dead one picks up
        # the orphaned job without waiting an interval.
        while True:
            try:
                sweep(self._channel)
                # Sending is cheap; looking for lost messages reads the whole broker queue
                # and is left to the api processes, away from the training loop's GIL.
                resources.get_dispatcher().run_once(check_lost=False)
                self._sweep_datasets_now_and_then()
            except Exception:  # noqa: BLE001 - keep watching; a DB blip must not end recovery
                log.warning("watchdog pass failed; retrying", exc_info=True)
            if self._stop.wait(self._interval):
                return


_watchdog: Watchdog | None = None


def start_watchdog() -> None:
    global _watchdog
    if _watchdog is None:
        interval = get_worker_settings().watchdog_interval_seconds
        _watchdog = Watchdog(resources.get_channel(), interval)
        _watchdog.start()


def stop_watchdog() -> None:
    global _watchdog
    if _watchdog is not None:
        _watchdog.stop()
        _watchdog = None
