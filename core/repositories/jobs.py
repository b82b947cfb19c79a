"""Jobs, their status history and progress.

Queries flush and never commit (see core/repositories/__init__.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Insert,
    Table,
    and_,
    bindparam,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Session

from core.models import (
    TERMINAL_STATUSES,
    Job,
    JobStatus,
    JobStatusEvent,
    new_id,
    utcnow,
)


def new_job_row(
    *,
    owner_id: str,
    name: str,
    spec: dict[str, Any],
    queue: str,
    current_lr: float | None = None,
    idempotency_key: str | None = None,
    request_hash: str | None = None,
    parent_id: str | None = None,
    fork_step: int | None = None,
    epoch: int = 0,
    step: int = 0,
) -> dict[str, Any]:
    """Every column of a job as it is submitted: queued, nothing trained yet (a fork
    starts where its parent's checkpoint stood)."""
    now = utcnow()
    return {
        "id": new_id(), "owner_id": owner_id, "name": name, "spec": spec, "queue": queue,
        "status": JobStatus.QUEUED.value, "status_reason": None, "epoch": epoch, "step": step,
        "current_lr": current_lr, "latest_metrics": {}, "attempts": 0,
        "idempotency_key": idempotency_key, "request_hash": request_hash,
        "created_at": now, "updated_at": now, "started_at": None, "finished_at": None,
        # The outbox: written with the row, so a stored job is always one to be sent.
        "dispatch_pending": True, "dispatched_at": None,
        "parent_id": parent_id, "fork_step": fork_step, "branch": 0, "parameters": None,
    }


def _first_event(job: dict[str, Any]) -> dict[str, Any]:
    return {"status": JobStatus.QUEUED.value, "reason": "submitted",
            "created_at": job["created_at"]}


def create_job(session: Session, **fields: Any) -> Job:
    """A queued job (:func:`new_job_row`'s fields) and its first status row, through the
    ORM: the job is attached to ``session``."""
    row = new_job_row(**fields)
    job = Job(**row)
    session.add_all([job, JobStatusEvent(job_id=job.id, **_first_event(row))])
    session.flush()
    return job


_JOBS = cast(Table, Job.__table__)
_JOB_STATUS_EVENTS = cast(Table, JobStatusEvent.__table__)


def _insert_job_with_first_event() -> Insert:
    """PostgreSQL: one INSERT of the job and, through a data-modifying CTE, its first
    status row. Built once: constructing and compiling it per call cost more CPU than the
    round trips it saves."""
    jobs, events = _JOBS, _JOB_STATUS_EVENTS
    new_job = (
        insert(jobs)
        .values({c.name: bindparam(c.name, type_=c.type) for c in jobs.c})
        .returning(jobs.c.id)
        .cte("new_job")
    )
    event_columns = ("status", "reason", "created_at")
    return insert(events).from_select(
        ["job_id", *event_columns],
        select(
            new_job.c.id,
            *(bindparam(f"event_{name}", type_=events.c[name].type) for name in event_columns),
        ),
    )


_INSERT_JOB_WITH_FIRST_EVENT = _insert_job_with_first_event()
_INSERT_JOB = insert(_JOBS)
_INSERT_JOB_EVENT = insert(_JOB_STATUS_EVENTS)


def insert_submitted_job(session: Session, **fields: Any) -> Job:
    """:func:`create_job` for ``POST /v1/jobs``, the hottest write: the job row and its
    first status-history row in as few round trips as the database allows, without the
    unit of work. On PostgreSQL both rows go in one statement, so a session in autocommit
    mode stores a job in one round trip instead of four (BEGIN, two INSERTs, COMMIT) and
    the pair is still all-or-nothing; SQLite runs two INSERTs.

    Returns a ``Job`` that is not attached to the session, every column set as stored.
    """
    values = new_job_row(**fields)
    event = _first_event(values)
    if session.get_bind().dialect.name == "postgresql":
        session.execute(
            _INSERT_JOB_WITH_FIRST_EVENT,
            values | {f"event_{key}": value for key, value in event.items()},
        )
    else:
        session.execute(_INSERT_JOB, values)
        session.execute(_INSERT_JOB_EVENT, event | {"job_id": values["id"]})
    return Job(**values)


def get_job(session: Session, *, job_id: str, owner_id: str | None = None) -> Job | None:
    """The job, or None when it does not exist or belongs to someone else."""
    query = select(Job).where(Job.id == job_id)
    if owner_id is not None:
        query = query.where(Job.owner_id == owner_id)
    return session.scalars(query).one_or_none()


def get_job_by_idempotency_key(session: Session, *, owner_id: str, key: str) -> Job | None:
    query = select(Job).where(Job.owner_id == owner_id, Job.idempotency_key == key)
    return session.scalars(query).one_or_none()


def list_jobs(
    session: Session,
    *,
    owner_id: str,
    limit: int,
    statuses: Sequence[str] | None = None,
    before: tuple[datetime, str] | None = None,
) -> list[Job]:
    """Newest first; ``before`` is the (created_at, id) of the last job of the previous page."""
    query = select(Job).where(Job.owner_id == owner_id)
    if statuses:
        query = query.where(Job.status.in_(list(statuses)))
    if before is not None:
        created_at, job_id = before
        query = query.where(
            or_(Job.created_at < created_at, and_(Job.created_at == created_at, Job.id < job_id))
        )
    query = query.order_by(Job.created_at.desc(), Job.id.desc()).limit(limit)
    return list(session.scalars(query))


def note_queued_reason(session: Session, *, job_id: str, reason: str) -> bool:
    """Say why a queued job waits (a distributed job's gang filling up) without moving it:
    no status history row, no dispatch; False when the job is no longer queued."""
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status == JobStatus.QUEUED.value)
        .values(status_reason=reason)
        .execution_options(synchronize_session=False)
    )
    session.flush()
    return getattr(result, "rowcount", 0) == 1


def transition_job(
    session: Session,
    *,
    job_id: str,
    to_status: JobStatus,
    from_statuses: Iterable[JobStatus] | None = None,
    reason: str | None = None,
) -> bool:
    """Compare-and-set the status; False when the job was not in ``from_statuses``.

    A conditional UPDATE rather than read-then-write, so the api cancelling a queued job
    and a worker starting it cannot both win.
    """
    allowed = (
        [s.value for s in from_statuses]
        if from_statuses is not None
        else [s.value for s in JobStatus if s not in TERMINAL_STATUSES and s != to_status]
    )
    now = utcnow()
    values: dict[str, Any] = {"status": to_status.value, "status_reason": reason, "updated_at": now}
    if to_status == JobStatus.RUNNING:
        values["started_at"] = now
    if to_status == JobStatus.QUEUED:
        # Every way back into the queue (resume, a lost worker, a worker shutting down)
        # puts the job in the outbox in this same statement; the dispatcher sends it.
        values["dispatch_pending"] = True
    else:
        values["dispatch_pending"] = False
    if to_status in TERMINAL_STATUSES:
        values["finished_at"] = now
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status.in_(allowed))
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    if getattr(result, "rowcount", 0) != 1:
        return False
    session.add(JobStatusEvent(job_id=job_id, status=to_status.value, reason=reason))
    session.flush()
    job = session.get(Job, job_id)
    if job is not None:
        session.refresh(job)
    return True


def update_job_progress(
    session: Session,
    *,
    job_id: str,
    epoch: int,
    step: int,
    current_lr: float | None = None,
    latest_metrics: dict[str, float] | None = None,
) -> None:
    """Record how far a job got; metrics are merged into the latest values."""
    job = session.get(Job, job_id)
    if job is None:
        return
    job.epoch = epoch
    job.step = step
    if current_lr is not None:
        job.current_lr = current_lr
    if latest_metrics:
        job.latest_metrics = {**(job.latest_metrics or {}), **latest_metrics}
    job.updated_at = utcnow()
    session.flush()


def running_jobs(session: Session) -> list[tuple[str, str, datetime | None]]:
    """``(id, queue, started_at)`` of every running job (the watchdog's sweep)."""
    rows = session.execute(
        select(Job.id, Job.queue, Job.started_at).where(Job.status == JobStatus.RUNNING.value)
    ).all()
    return [(row[0], row[1], row[2]) for row in rows]


def queued_jobs_untouched_since(session: Session, *, cutoff: datetime) -> list[tuple[str, str]]:
    """``(id, queue)`` of queued jobs whose row has not changed since ``cutoff``."""
    rows = session.execute(
        select(Job.id, Job.queue).where(
            Job.status == JobStatus.QUEUED.value, Job.updated_at < cutoff
        )
    ).all()
    return [(row[0], row[1]) for row in rows]


def set_current_lr(session: Session, *, job_id: str, learning_rate: float) -> None:
    """The lr in effect now (a confirmed change), without touching step or epoch."""
    session.execute(
        update(Job).where(Job.id == job_id)
        .values(current_lr=learning_rate, updated_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    session.flush()


def increment_attempts(session: Session, *, job_id: str) -> int:
    session.execute(
        update(Job)
        .where(Job.id == job_id)
        .values(attempts=Job.attempts + 1)
        .execution_options(synchronize_session=False)
    )
    session.flush()
    return int(session.scalar(select(Job.attempts).where(Job.id == job_id)) or 0)


def list_status_events(session: Session, *, job_id: str) -> list[JobStatusEvent]:
    query = select(JobStatusEvent).where(JobStatusEvent.job_id == job_id)
    return list(session.scalars(query.order_by(JobStatusEvent.id)))


def status_events_of(session: Session, *,
                     job_ids: Sequence[str]) -> dict[str, list[JobStatusEvent]]:
    """Each job's status history, oldest first, in one query (a page of the job list)."""
    found: dict[str, list[JobStatusEvent]] = {job_id: [] for job_id in job_ids}
    if not job_ids:
        return found
    query = select(JobStatusEvent).where(JobStatusEvent.job_id.in_(list(job_ids)))
    for event in session.scalars(query.order_by(JobStatusEvent.id)):
        found[event.job_id].append(event)
    return found


def set_job_parameters(session: Session, *, job_id: str,
                       parameters: list[dict[str, Any]]) -> None:
    """The model's parameter names as the worker built them (checked by freeze)."""
    session.execute(
        update(Job).where(Job.id == job_id).values(parameters=parameters)
        .execution_options(synchronize_session=False)
    )
    session.flush()


def list_children(session: Session, *, job_id: str) -> list[Job]:
    """The jobs forked from this one, oldest first."""
    query = select(Job).where(Job.parent_id == job_id)
    return list(session.scalars(query.order_by(Job.created_at, Job.id)))


def start_branch(session: Session, *, job_id: str, step: int, epoch: int) -> int:
    """A rollback: count a new branch and put the job's progress back at the checkpoint
    it rewinds to; returns the branch number of the steps being abandoned (1, 2, ...)."""
    session.execute(
        update(Job).where(Job.id == job_id)
        .values(branch=Job.branch + 1, step=step, epoch=epoch, updated_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    session.flush()
    return int(session.scalar(select(Job.branch).where(Job.id == job_id)) or 0)
