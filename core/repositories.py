"""Every query the service runs. Functions take keyword arguments, ``flush()`` and never
commit: the request or task that opened the session decides when to commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Insert,
    Table,
    and_,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from core.models import (
    TERMINAL_STATUSES,
    ApiToken,
    Checkpoint,
    Dataset,
    Job,
    JobStatus,
    JobStatusEvent,
    LRChange,
    LRChangeMode,
    LRChangeStatus,
    MetricPoint,
    User,
    new_id,
    utcnow,
)

# ---------------------------------------------------------------- users


def create_user(session: Session, *, name: str) -> User:
    user = User(name=name)
    session.add(user)
    session.flush()
    return user


def get_user(session: Session, *, user_id: str) -> User | None:
    return session.get(User, user_id)


def get_user_by_name(session: Session, *, name: str) -> User | None:
    return session.scalars(select(User).where(User.name == name)).one_or_none()


def add_api_token(
    session: Session, *, user_id: str, token_hash: str, prefix: str, label: str
) -> ApiToken:
    row = ApiToken(user_id=user_id, token_hash=token_hash, prefix=prefix, label=label)
    session.add(row)
    session.flush()
    return row


def get_api_token(session: Session, *, token_hash: str) -> ApiToken | None:
    query = select(ApiToken).where(ApiToken.token_hash == token_hash)
    return session.scalars(query).one_or_none()


def mark_api_token_revoked(session: Session, *, token_id: str) -> bool:
    """Revoke a token once; False when it was already revoked (or does not exist)."""
    row = session.get(ApiToken, token_id)
    if row is None or row.revoked_at is not None:
        return False
    row.revoked_at = utcnow()
    session.flush()
    return True


# ---------------------------------------------------------------- jobs


def new_job_row(
    *,
    owner_id: str,
    name: str,
    spec: dict[str, Any],
    queue: str,
    current_lr: float | None = None,
    idempotency_key: str | None = None,
    request_hash: str | None = None,
) -> dict[str, Any]:
    """Every column of a job as it is submitted: queued, nothing trained yet."""
    now = utcnow()
    return {
        "id": new_id(), "owner_id": owner_id, "name": name, "spec": spec, "queue": queue,
        "status": JobStatus.QUEUED.value, "status_reason": None, "epoch": 0, "step": 0,
        "current_lr": current_lr, "latest_metrics": {}, "attempts": 0,
        "idempotency_key": idempotency_key, "request_hash": request_hash,
        "created_at": now, "updated_at": now, "started_at": None, "finished_at": None,
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


# ---------------------------------------------------------------- metrics


@dataclass(frozen=True)
class MetricPointIn:
    step: int
    epoch: int
    name: str
    value: float
    time: datetime | None = None


def add_metric_points(session: Session, *, job_id: str, points: Iterable[MetricPointIn]) -> int:
    """Insert points, ignoring ones already stored (same job, name, step): a resumed
    worker re-sends the steps after its checkpoint and that must not fail."""
    now = utcnow()
    rows = [
        {"job_id": job_id, "step": p.step, "epoch": p.epoch, "name": p.name,
         "value": float(p.value), "time": p.time or now}
        for p in points
    ]
    if not rows:
        return 0
    dialect = session.get_bind().dialect.name
    insert_fn = pg_insert if dialect == "postgresql" else sqlite_insert
    statement = insert_fn(MetricPoint).on_conflict_do_nothing(
        index_elements=["job_id", "name", "step"]
    )
    session.execute(statement, rows)
    session.flush()
    return len(rows)


def list_metric_points(
    session: Session,
    *,
    job_id: str,
    after_step: int | None = None,
    after: tuple[int, str] | None = None,
    names: Sequence[str] | None = None,
    limit: int = 10_000,
) -> list[MetricPoint]:
    """Points ordered by (step, name), the unique key within a job, so ``after`` (the
    (step, name) of the last point already read) resumes exactly where a page ended."""
    query = select(MetricPoint).where(MetricPoint.job_id == job_id)
    if after_step is not None:
        query = query.where(MetricPoint.step > after_step)
    if after is not None:
        step, name = after
        query = query.where(
            or_(
                MetricPoint.step > step,
                and_(MetricPoint.step == step, MetricPoint.name > name),
            )
        )
    if names:
        query = query.where(MetricPoint.name.in_(list(names)))
    query = query.order_by(MetricPoint.step, MetricPoint.name).limit(limit)
    return list(session.scalars(query))


def metric_columns(
    session: Session, *, job_id: str, names: Sequence[str] | None = None
) -> list[tuple[str, int, int, float]]:
    """Every point of a job as bare ``(name, step, epoch, value)`` rows ordered by
    (name, step), for charts that thin 100k points per request.

    SQLAlchemy builds and binds the statement; the driver's cursor fetches the rows,
    because wrapping 100k rows in Row objects costs about three times the query itself.
    """
    query = select(MetricPoint.name, MetricPoint.step, MetricPoint.epoch, MetricPoint.value)
    query = query.where(MetricPoint.job_id == job_id)
    if names:
        query = query.where(MetricPoint.name.in_(list(names)))
    query = query.order_by(MetricPoint.name, MetricPoint.step)
    compiled = query.compile(
        dialect=session.get_bind().dialect, compile_kwargs={"render_postcompile": True}
    )
    params: Any = compiled.params
    if compiled.positional:
        params = tuple(compiled.params[key] for key in compiled.positiontup or ())
    cursor = session.connection().connection.cursor()
    try:
        cursor.execute(str(compiled), params)
        return cast(list[tuple[str, int, int, float]], cursor.fetchall())
    finally:
        cursor.close()


def metric_steps_by_time(session: Session, *, job_id: str) -> list[tuple[datetime, int]]:
    """``(time, step)`` of the last point stored for each step: where a job stood at a
    moment, used to place status changes (which record only a time) on the step axis."""
    query = (
        select(func.max(MetricPoint.time), MetricPoint.step)
        .where(MetricPoint.job_id == job_id)
        .group_by(MetricPoint.step)
        .order_by(MetricPoint.step)
    )
    return [(r[0], r[1]) for r in session.execute(query)]


# ---------------------------------------------------------------- learning-rate changes


def create_lr_change(
    session: Session,
    *,
    job_id: str,
    requested_lr: float,
    mode: LRChangeMode,
    requested_by: str,
) -> LRChange:
    change = LRChange(
        job_id=job_id,
        requested_lr=requested_lr,
        mode=mode.value,
        requested_by=requested_by,
        status=LRChangeStatus.PENDING.value,
    )
    session.add(change)
    session.flush()
    return change


def lr_change_times_since(session: Session, *, job_id: str, since: datetime) -> list[datetime]:
    """Request times of this job's changes since ``since``, oldest first (for rate limits)."""
    query = (
        select(LRChange.requested_at)
        .where(LRChange.job_id == job_id, LRChange.requested_at >= since)
        .order_by(LRChange.requested_at)
    )
    return list(session.scalars(query))


def get_lr_change(session: Session, *, change_id: str) -> LRChange | None:
    return session.get(LRChange, change_id)


def list_lr_changes(session: Session, *, job_id: str) -> list[LRChange]:
    query = select(LRChange).where(LRChange.job_id == job_id)
    return list(session.scalars(query.order_by(LRChange.requested_at, LRChange.id)))


def mark_lr_change_applied(
    session: Session,
    *,
    change_id: str,
    applied_step: int,
    applied_lr: float | None = None,
    applied_at: datetime | None = None,
) -> bool:
    """Confirm a change; idempotent (a replayed confirmation keeps the first step)."""
    result = session.execute(
        update(LRChange)
        .where(LRChange.id == change_id, LRChange.status == LRChangeStatus.PENDING.value)
        .values(
            status=LRChangeStatus.APPLIED.value,
            applied_step=applied_step,
            applied_lr=applied_lr,
            applied_at=applied_at or utcnow(),
        )
        .execution_options(synchronize_session=False)
    )
    session.flush()
    return getattr(result, "rowcount", 0) == 1


def mark_lr_change_rejected(session: Session, *, change_id: str, reason: str) -> bool:
    result = session.execute(
        update(LRChange)
        .where(LRChange.id == change_id, LRChange.status == LRChangeStatus.PENDING.value)
        .values(status=LRChangeStatus.REJECTED.value, reason=reason)
        .execution_options(synchronize_session=False)
    )
    session.flush()
    return getattr(result, "rowcount", 0) == 1


# ---------------------------------------------------------------- checkpoints


def add_checkpoint(
    session: Session,
    *,
    job_id: str,
    step: int,
    epoch: int,
    key_prefix: str,
    files: dict[str, dict[str, Any]],
) -> Checkpoint:
    """Record a complete checkpoint (its meta.json is already written)."""
    existing = get_checkpoint(session, job_id=job_id, step=step)
    size = sum(int(f.get("size", 0)) for f in files.values())
    if existing is not None:  # a re-run slice wrote the same step again
        existing.files, existing.size, existing.epoch = files, size, epoch
        existing.key_prefix = key_prefix
        session.flush()
        return existing
    checkpoint = Checkpoint(
        job_id=job_id, step=step, epoch=epoch, key_prefix=key_prefix, files=files, size=size
    )
    session.add(checkpoint)
    session.flush()
    return checkpoint


def list_checkpoints(session: Session, *, job_id: str) -> list[Checkpoint]:
    query = select(Checkpoint).where(Checkpoint.job_id == job_id)
    return list(session.scalars(query.order_by(Checkpoint.step)))


def get_checkpoint(session: Session, *, job_id: str, step: int) -> Checkpoint | None:
    query = select(Checkpoint).where(Checkpoint.job_id == job_id, Checkpoint.step == step)
    return session.scalars(query).one_or_none()


def latest_checkpoint(session: Session, *, job_id: str) -> Checkpoint | None:
    query = select(Checkpoint).where(Checkpoint.job_id == job_id)
    return session.scalars(query.order_by(Checkpoint.step.desc()).limit(1)).one_or_none()


def delete_checkpoints(session: Session, *, job_id: str, steps: list[int]) -> None:
    if steps:
        session.execute(
            delete(Checkpoint).where(Checkpoint.job_id == job_id, Checkpoint.step.in_(steps))
        )


def delete_job(session: Session, *, job_id: str) -> None:
    """A job's rows and everything hanging off them (children first: SQLite enforces
    ON DELETE CASCADE only when told to, so the order does not rely on it)."""
    for child in (MetricPoint, LRChange, Checkpoint, JobStatusEvent):
        session.execute(delete(child).where(child.job_id == job_id))
    session.execute(delete(Job).where(Job.id == job_id))
    session.flush()


# ---------------------------------------------------------------- datasets


def create_dataset(session: Session, *, owner_id: str, **fields: Any) -> Dataset:
    dataset = Dataset(owner_id=owner_id, **fields)
    session.add(dataset)
    session.flush()
    return dataset


def get_dataset(
    session: Session, *, dataset_id: str, owner_id: str | None = None
) -> Dataset | None:
    query = select(Dataset).where(Dataset.id == dataset_id)
    if owner_id is not None:
        query = query.where(Dataset.owner_id == owner_id)
    return session.scalars(query).one_or_none()


def list_datasets(session: Session, *, owner_id: str, limit: int = 200) -> list[Dataset]:
    query = select(Dataset).where(Dataset.owner_id == owner_id)
    return list(session.scalars(query.order_by(Dataset.created_at.desc()).limit(limit)))



def jobs_using_dataset(
    session: Session, *, owner_id: str, dataset_id: str, statuses: Sequence[JobStatus]
) -> list[str]:
    """Ids of the owner's jobs in ``statuses`` whose spec reads ``dataset_id``.

    The spec is JSON, so the match is made on the decoded specs of the owner's jobs in
    those statuses (a handful: the ones that can still run).
    """
    rows = session.execute(
        select(Job.id, Job.spec).where(
            Job.owner_id == owner_id, Job.status.in_([s.value for s in statuses])
        )
    ).all()
    using = []
    for job_id, spec in rows:
        data = (spec or {}).get("data") or {}
        sources = [data.get("train") or {}, data.get("val") or {}]
        if any(isinstance(src, dict) and src.get("dataset") == dataset_id for src in sources):
            using.append(str(job_id))
    return using


def delete_dataset(session: Session, *, dataset_id: str) -> None:
    session.execute(delete(Dataset).where(Dataset.id == dataset_id))
    session.flush()
