"""One delivery of ``rudder.train(job_id)``: lease, status transitions, run, outcome.

Idempotent by construction: a job that is finished, paused or owned by a live worker is
left alone, so duplicate deliveries (Celery re-delivery after the visibility timeout, a
watchdog re-queue racing a slow worker) never make one job run twice at once.
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass
from pathlib import Path

from core import repositories as repo
from core.channel import Channel
from core.config import get_settings
from core.datasets import validate_csv
from core.db import session_scope
from core.events import LogEvent, SetLRCommand
from core.job_status import transition_and_announce
from core.models import DatasetStatus, JobStatus, LRChangeStatus
from core.storage import ObjectNotFound, dataset_key
from workers.build import SpecError
from workers.data_sources import StoredDataset
from workers.db_retry import retry_db
from workers.lease import Lease
from workers.resources import dispatch_now, get_channel, get_store
from workers.runner import JobRunner, ReplayedChange
from workers.service_io import ControlListener, ServiceIO, send_leftover_writes
from workers.settings import get_worker_settings

log = logging.getLogger(__name__)


class LeaseBusy(Exception):
    """A queued job's previous lease is still held; the task retries a little later."""


@dataclass(frozen=True)
class Outcome:
    job_id: str
    result: str  # succeeded | paused | cancelled | failed | lease_lost | skipped:<why>


def _set_status(channel: Channel, job_id: str, status: JobStatus, reason: str | None,
                from_statuses: list[JobStatus], *, step: int | None = None,
                command_id: str | None = None) -> bool:
    """One status transition, retried through a database outage: a job whose final write
    failed would stay ``running`` and later be re-queued as "worker lost", which is false.
    (The transition is a compare-and-set, so a retry after a lost commit reply is a no-op.)
    """
    def write() -> bool:
        with session_scope() as session:
            return transition_and_announce(session, channel, job_id=job_id, to_status=status,
                                           from_statuses=from_statuses, reason=reason,
                                           step=step, command_id=command_id)

    return retry_db(write, what=f"job {job_id} status {status.value}",
                    deadline_seconds=get_worker_settings().db_retry_seconds)


def _lr_commands(job_id: str) -> tuple[list[SetLRCommand], list[ReplayedChange]]:
    """Pending changes (apply at start) and applied ones (replay after a resume)."""
    pending: list[SetLRCommand] = []
    replay: list[ReplayedChange] = []
    with session_scope() as session:
        for change in repo.list_lr_changes(session, job_id=job_id):
            command = SetLRCommand(command_id=change.id, learning_rate=change.requested_lr,
                                   mode="override" if change.mode == "override" else "scale")
            if change.status == LRChangeStatus.PENDING.value:
                pending.append(command)
            elif change.status == LRChangeStatus.APPLIED.value and change.applied_step:
                replay.append(ReplayedChange(applied_step=int(change.applied_step),
                                             command=command))
    return pending, replay


def _load_upload(dataset_id: str) -> bytes:
    with session_scope() as session:
        dataset = repo.get_dataset(session, dataset_id=dataset_id)
        if dataset is None:
            raise SpecError(f"dataset {dataset_id} does not exist")
        key, stored_csv = dataset.storage_key, dataset.format == "csv" and bool(dataset.files)
    if not stored_csv:
        return get_store().get(key)
    # A CSV stored as sent: its validation wrote the npz the loader reads.
    try:
        return get_store().get(dataset_key(dataset_id, "npz"))
    except ObjectNotFound:  # validated before validation converted: convert it now
        limits = get_settings().limits
        return validate_csv(get_store().get(key), max_rows=limits.max_dataset_rows,
                            max_features=limits.max_dataset_features).npz_bytes


def _lookup_dataset(dataset_id: str) -> StoredDataset:
    with session_scope() as session:
        dataset = repo.get_dataset(session, dataset_id=dataset_id)
        if dataset is None:
            raise SpecError(f"dataset {dataset_id} does not exist")
        if dataset.status != DatasetStatus.READY.value:
            raise SpecError(f"dataset {dataset_id} is {dataset.status}, not ready")
        files = dataset.files or [{"path": f"data.{dataset.format}",
                                   "key": dataset.storage_key, "size": dataset.size}]
        return StoredDataset(dataset.id, dataset.format, list(files), dataset.stats)


def run_job(job_id: str) -> Outcome:
    """Train ``job_id`` if it is ours to train; returns what happened."""
    channel = get_channel()

    def read_job() -> tuple[JobStatus, dict[str, object], int] | None:
        with session_scope() as session:
            job = repo.get_job(session, job_id=job_id)
            if job is None:
                return None
            return JobStatus(job.status), dict(job.spec), job.attempts

    # (The first query after a database restart meets a dead pooled connection.)
    found = retry_db(read_job, what=f"job {job_id} start",
                     deadline_seconds=get_worker_settings().db_retry_seconds)
    if found is None:
        return Outcome(job_id, "skipped:no such job")
    status, spec, attempts = found
    if status not in (JobStatus.QUEUED, JobStatus.RUNNING):
        return Outcome(job_id, f"skipped:{status.value}")

    worker_settings = get_worker_settings()
    lease = Lease(channel, job_id, ttl_seconds=worker_settings.lease_ttl_seconds)
    if not lease.acquire():
        if status == JobStatus.QUEUED:
            raise LeaseBusy(job_id)  # the previous run is still letting go
        return Outcome(job_id, "skipped:running elsewhere")
    try:
        return _run_with_lease(channel, job_id, spec, lease, attempts)
    finally:
        lease.release()


def _run_with_lease(channel: Channel, job_id: str, spec: dict[str, object], lease: Lease,
                    attempts: int) -> Outcome:
    worker_settings = get_worker_settings()
    if attempts > worker_settings.max_attempts:
        _set_status(channel, job_id, JobStatus.FAILED,
                    f"gave up after {attempts} attempts", [JobStatus.QUEUED, JobStatus.RUNNING])
        return Outcome(job_id, "failed")
    send_leftover_writes(channel, job_id, worker_settings.spool_dir,
                         worker_settings.db_retry_seconds)
    # Read the control stream's position *before* the DB's pending changes: a change sent
    # in between is then seen twice (deduplicated by id), never missed.
    listener = ControlListener(channel, job_id, after=channel.last_command_id(job_id))
    pending, replay = retry_db(lambda: _lr_commands(job_id), what=f"job {job_id} lr changes",
                               deadline_seconds=worker_settings.db_retry_seconds)
    if not _set_status(channel, job_id, JobStatus.RUNNING, None,
                       [JobStatus.QUEUED, JobStatus.RUNNING]):
        return Outcome(job_id, "skipped:status changed")
    for command in pending:
        listener.push(command)
    listener.start()
    job_io = ServiceIO(channel, job_id, still_owner=lambda: lease.held, listener=listener,
                       spool_dir=worker_settings.spool_dir,
                       db_retry_seconds=worker_settings.db_retry_seconds)
    lease.when_lost(job_io.wake.set)
    try:
        runner = JobRunner(job_id, spec, get_store(), job_io, load_upload=_load_upload,
                           lookup_dataset=_lookup_dataset,
                           data_cache=Path(get_settings().home) / "cache",
                           replay=replay, pacing=worker_settings.pacing())
        result = runner.run()
    except Exception as exc:  # noqa: BLE001 - any failure ends the job as failed, with why
        job_io.close()
        listener.stop()
        reason = str(exc) if isinstance(exc, SpecError) else f"{type(exc).__name__}: {exc}"
        log.error("job %s failed: %s", job_id, traceback.format_exc())
        if lease.held:
            channel.publish(job_id, LogEvent(level="error", message=reason))
            _set_status(channel, job_id, JobStatus.FAILED, reason, [JobStatus.RUNNING])
        return Outcome(job_id, "failed")
    job_io.close()
    listener.stop()
    if result.outcome == "lease_lost" or not lease.held:
        log.error("job %s: lease lost at step %d; stopped without writing", job_id, result.step)
        return Outcome(job_id, "lease_lost")
    if result.outcome == "interrupted":
        # The worker is stopping: the job checkpointed; hand it to the next worker. Queued
        # is written with its outbox mark, so the hand-over needs only the database: if
        # Redis is down now, whichever dispatcher runs next sends the job.
        reason = "worker shutting down; re-queued from its checkpoint"
        if _set_status(channel, job_id, JobStatus.QUEUED, reason, [JobStatus.RUNNING],
                       step=result.step):
            dispatch_now()
        return Outcome(job_id, "interrupted")
    final = {
        "succeeded": (JobStatus.SUCCEEDED, None),
        "paused": (JobStatus.PAUSED, "paused by user"),
        "cancelled": (JobStatus.CANCELLED, "cancelled by user"),
    }[result.outcome]
    # The api may already have recorded pause/cancel; then the CAS fails and that's fine.
    _set_status(channel, job_id, final[0], final[1], [JobStatus.RUNNING], step=result.step,
                command_id=result.command_id)
    return Outcome(job_id, result.outcome)
