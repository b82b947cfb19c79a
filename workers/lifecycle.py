"""One delivery of ``rudder.train(job_id)``: lease, status transitions, run, outcome.

Idempotent by construction: a job that is finished, paused or owned by a live worker is
left alone, so duplicate deliveries (Celery re-delivery after the visibility timeout, a
watchdog re-queue racing a slow worker) never make one job run twice at once.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from core import repositories as repo
from core.channel import Channel
from core.commands import REPLAYED, Command, CommandOutcome
from core.config import get_settings
from core.datasets import validate_csv
from core.db import session_scope
from core.events import LogEvent
from core.job_status import announce_status, transition_and_announce
from core.models import CommandStatus, DatasetStatus, JobStatus
from core.rewind import rewind_job
from core.steering import command_of_row, outcome_event
from core.storage import ObjectNotFound, dataset_key
from engine.distributed import DistributedError
from workers.build import SpecError
from workers.data_sources import StoredDataset
from workers.db_retry import retry_db
from workers.job_log import forwarded_logs
from workers.lease import Lease
from workers.resources import dispatch_now, get_channel, get_store
from workers.runner import JobRunner, ReplayedCommand, RunResult
from workers.service_io import (
    ControlListener,
    ServiceIO,
    record_outcome,
    send_leftover_writes,
)
from workers.settings import get_worker_settings

log = logging.getLogger(__name__)


class LeaseBusy(Exception):
    """A queued job's previous lease is still held; the task retries a little later."""


@dataclass(frozen=True)
class Outcome:
    job_id: str
    result: str  # succeeded | paused | cancelled | failed | lease_lost | skipped:<why>
    # (job id, generation) of an older gang whose seat this worker takes next: a rank 0
    # that gave way to it (workers.gang.waiting), its own job back in the queue
    then_join: tuple[str, int] | None = None


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


def _step_commands(job_id: str) -> tuple[list[Command], list[ReplayedCommand], int]:
    """Pending commands (applied at start), applied ones to replay after a resume, and the
    job's branch. A rule's command is not replayed: the rule decides it again when the
    resumed run re-trains that step (with the same id)."""
    pending: list[Command] = []
    replay: list[ReplayedCommand] = []
    with session_scope() as session:
        job = repo.get_job(session, job_id=job_id)
        branch = job.branch if job is not None else 0
        for row in repo.list_commands(session, job_id=job_id):
            if row.status == CommandStatus.PENDING.value:
                pending.append(command_of_row(row))
            elif (row.status == CommandStatus.APPLIED.value and not row.abandoned
                  and row.kind in REPLAYED and row.source != "rule"
                  and row.applied_step is not None):
                replay.append(ReplayedCommand(applied_step=int(row.applied_step),
                                              command=command_of_row(row)))
    return pending, replay, branch


def _publish_parameters(job_id: str) -> Callable[[list[dict[str, Any]]], None]:
    """Store the model's parameter names for the api's freeze checks (once per run)."""
    def store(parameters: list[dict[str, Any]]) -> None:
        def write() -> None:
            with session_scope() as session:
                repo.set_job_parameters(session, job_id=job_id, parameters=parameters)
        retry_db(write, what=f"job {job_id} parameter names",
                 deadline_seconds=get_worker_settings().db_retry_seconds)
    return store


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


def gang_size(spec: dict[str, object]) -> int:
    """How many workers train the job together (the spec's resources.workers)."""
    resources = spec.get("resources")
    return int(resources.get("workers", 1)) if isinstance(resources, dict) else 1


def _run_with_lease(channel: Channel, job_id: str, spec: dict[str, object], lease: Lease,
                    attempts: int) -> Outcome:
    worker_settings = get_worker_settings()
    if attempts > worker_settings.max_attempts:
        _set_status(channel, job_id, JobStatus.FAILED,
                    f"gave up after {attempts} attempts", [JobStatus.QUEUED, JobStatus.RUNNING])
        return Outcome(job_id, "failed")
    send_leftover_writes(channel, job_id, worker_settings.spool_dir,
                         worker_settings.db_retry_seconds)
    if gang_size(spec) > 1:
        from workers.gang.lifecycle import lead_gang  # (it imports this module)

        return lead_gang(channel, job_id, spec, lease)
    if not _set_status(channel, job_id, JobStatus.RUNNING, None,
                       [JobStatus.QUEUED, JobStatus.RUNNING]):
        return Outcome(job_id, "skipped:status changed")
    while True:
        result = _train(channel, job_id, spec, lease)
        if isinstance(result, Outcome):
            return result
        if result.outcome != "rolled_back" or result.rollback is None:
            return _report(channel, job_id, result)
        # A rollback: rewind the job's record and storage to the checkpoint, then train
        # on from it, as a run stopped there and resumed would (same lease, no re-queue).
        rewind = partial(_rewind, channel, job_id, result.rollback.step,
                         result.rollback.command_id)
        try:
            retry_db(rewind, what=f"job {job_id} rollback",
                     deadline_seconds=worker_settings.db_retry_seconds)
        except Exception as exc:  # noqa: BLE001 - refused with the reason; training goes on
            log.exception("job %s: rollback to step %d failed", job_id, result.rollback.step)
            _refuse(channel, job_id, result.rollback, f"{type(exc).__name__}: {exc}")


def _refuse(channel: Channel, job_id: str, command: Command, reason: str) -> None:
    """Record a command the worker could not carry out, with why (the job trains on)."""
    outcome = CommandOutcome(command=command, status="rejected", reason=reason)

    def write() -> None:
        with session_scope() as session:
            record_outcome(session, job_id, outcome)
    retry_db(write, what=f"job {job_id} command {command.command_id}",
             deadline_seconds=get_worker_settings().db_retry_seconds)
    announce_status(channel, job_id, outcome_event(outcome))


def _rewind(channel: Channel, job_id: str, step: int, command_id: str) -> None:
    with session_scope() as session:
        outcome = rewind_job(session, get_store(), job_id=job_id, to_step=step,
                             command_id=command_id)
    announce_status(channel, job_id, outcome_event(outcome))


def _train(channel: Channel, job_id: str, spec: dict[str, object],
           lease: Lease, runner_class: Callable[..., JobRunner] = JobRunner,
           **runner_kwargs: Any) -> RunResult | Outcome:
    """One run of the training loop on the lease, from the latest complete checkpoint.
    (Rank 0 of a distributed job passes its runner; a failed collective propagates.)"""
    worker_settings = get_worker_settings()
    # Read the control stream's position *before* the DB's pending commands: a command
    # sent in between is then seen twice (deduplicated by id), never missed.
    listener = ControlListener(channel, job_id, after=channel.last_command_id(job_id))
    pending, replay, branch = retry_db(lambda: _step_commands(job_id),
                                       what=f"job {job_id} commands",
                                       deadline_seconds=worker_settings.db_retry_seconds)
    for command in pending:
        listener.push(command)
    listener.start()
    job_io = ServiceIO(channel, job_id, still_owner=lambda: lease.held, listener=listener,
                       spool_dir=worker_settings.spool_dir,
                       db_retry_seconds=worker_settings.db_retry_seconds)
    lease.when_lost(job_io.wake.set)
    try:
        runner = runner_class(job_id, spec, get_store(), job_io, load_upload=_load_upload,
                              lookup_dataset=_lookup_dataset,
                              data_cache=Path(get_settings().home) / "cache",
                              replay=replay, pacing=worker_settings.pacing(), branch=branch,
                              on_built=_publish_parameters(job_id), **runner_kwargs)
        with forwarded_logs(channel, job_id):  # `rudder logs` shows the worker's lines
            result = runner.run()
    except DistributedError:
        job_io.close()
        listener.stop()
        raise
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
    return result


def _report(channel: Channel, job_id: str, result: RunResult) -> Outcome:
    """The job's status after a run that ended on its own terms."""
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
        "succeeded": (JobStatus.SUCCEEDED, result.reason),
        "paused": (JobStatus.PAUSED, result.reason or "paused by user"),
        "cancelled": (JobStatus.CANCELLED, result.reason or "cancelled by user"),
    }[result.outcome]
    # The api may already have recorded pause/cancel; then the CAS fails and that's fine.
    _set_status(channel, job_id, final[0], final[1], [JobStatus.RUNNING], step=result.step,
                command_id=result.command_id)
    return Outcome(job_id, result.outcome)
