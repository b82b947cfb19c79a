"""Submitting and controlling jobs. Rows are committed before anything is enqueued."""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from api import cursors, telemetry
from api.errors import ApiError, field_error, not_found
from api.schemas.jobs import JobControlPublic
from api.services.commands import record_and_send
from api.services.model_checks import IMAGE_FORMATS, check_model_fits_data, record_shape
from api.state import ServiceState
from core import model_size, repositories
from core.events import CancelCommand, PauseCommand
from core.job_status import transition_and_announce
from core.jobspec import BuiltinSource, JobSpec
from core.models import TERMINAL_STATUSES, Job, JobStatus, User, is_id
from core.storage import job_objects_prefix

log = logging.getLogger("rudder.api")
MAX_IDEMPOTENCY_KEY = 255


def _request_hash(spec: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _check_idempotency_key(key: str) -> None:
    if not key or len(key) > MAX_IDEMPOTENCY_KEY or not key.isprintable():
        raise field_error(
            "Idempotency-Key", f"must be 1 to {MAX_IDEMPOTENCY_KEY} printable characters"
        )


def _replay(existing: Job, request_hash: str) -> Job:
    if existing.request_hash != request_hash:
        raise ApiError(
            409,
            "idempotency_conflict",
            "Idempotency-Key was already used with a different job spec",
            details={"job_id": existing.id},
        )
    return existing


def _check_spec_references(
    session: Session, *, spec: JobSpec, owner: User, state: ServiceState
) -> None:
    max_workers = state.settings.limits.max_job_workers
    if spec.resources.workers > max_workers:
        raise field_error(
            "resources.workers",
            f"asks for {spec.resources.workers} workers; this service allows at most "
            f"{max_workers} per job (RUDDER_LIMITS__MAX_JOB_WORKERS)",
        )
    shapes: dict[str, tuple[int, ...] | None] = {}
    for split in ("train", "val"):
        source = getattr(spec.data, split)
        if isinstance(source, BuiltinSource):
            try:
                shapes[split] = model_size.builtin_record_shape(source)
            except ValueError as exc:
                raise field_error(f"data.{split}.transforms", str(exc)) from None
            continue
        dataset_id = getattr(source, "dataset", None)
        if dataset_id is None:
            continue
        dataset = repositories.get_dataset(session, dataset_id=dataset_id, owner_id=owner.id)
        if dataset is None:
            raise field_error(f"data.{split}.dataset", f"dataset {dataset_id} not found")
        if dataset.status != "ready":
            why = f" ({dataset.reason})" if dataset.reason else ""
            raise field_error(
                f"data.{split}.dataset",
                f"dataset {dataset_id} is {dataset.status}{why}; only a ready data set trains",
            )
        if getattr(source, "transforms", None) and dataset.format not in IMAGE_FORMATS:
            raise field_error(
                f"data.{split}.transforms",
                f"transforms apply to image data sets (RecordIO, image folders); dataset "
                f"{dataset_id} is {dataset.format}",
            )
        if split == "train" and spec.data.normalize == "auto" and not (
            dataset.stats and dataset.stats.get("mean")
        ):
            raise field_error(
                "data.normalize", f"dataset {dataset_id} has no per-channel statistics to "
                "normalise with (too many features); leave normalize out",
            )
        shapes[split] = record_shape(dataset, source, f"data.{split}")
    size = check_model_fits_data(session, state=state, spec=spec, owner=owner,
                                 shape=shapes.get("train"), val_shape=shapes.get("val"))
    limit = state.settings.limits.max_job_memory_bytes
    if size.bytes > limit:
        raise field_error(
            "model",
            f"the model needs about {model_size.human_bytes(size.bytes)} "
            f"({size.parameters:,} parameters, batch {spec.data.batch_size}); "
            f"the limit per job is {model_size.human_bytes(limit)}",
        )
    lr = spec.initial_learning_rate()
    bounds = state.settings.lr
    if lr is not None and not bounds.min <= lr <= bounds.max:
        raise field_error(
            "optimizer.learning_rate", f"must be between {bounds.min} and {bounds.max}"
        )


def submit_job(
    session: Session,
    *,
    state: ServiceState,
    owner: User,
    spec: JobSpec,
    idempotency_key: str | None,
) -> tuple[Job, bool]:
    """Store the job (with its outbox mark, in the same statement) and wake the
    dispatcher after commit; returns (job, created)."""
    spec_json = spec.model_dump(mode="json")
    request_hash = _request_hash(spec_json)
    if idempotency_key is not None:
        _check_idempotency_key(idempotency_key)
        existing = repositories.get_job_by_idempotency_key(
            session, owner_id=owner.id, key=idempotency_key
        )
        if existing is not None:
            return _replay(existing, request_hash), False
    _check_spec_references(session, spec=spec, owner=owner, state=state)
    queue = spec.queue(default=state.settings.default_queue)
    try:
        job = repositories.insert_submitted_job(
            session,
            owner_id=owner.id,
            name=spec.name,
            spec=spec_json,
            queue=queue,
            current_lr=spec.learning_rate_at_start(),
            idempotency_key=idempotency_key,
            request_hash=request_hash,
        )
        session.commit()
    except IntegrityError:
        # Two requests with the same key raced; the loser answers with the winner's job.
        session.rollback()
        if idempotency_key is None:
            raise
        existing = repositories.get_job_by_idempotency_key(
            session, owner_id=owner.id, key=idempotency_key
        )
        if existing is None:
            raise
        return _replay(existing, request_hash), False
    telemetry.JOBS_SUBMITTED.labels(queue).inc()
    enqueue_after_commit(state, job)
    return job, True


def submit_in_new_session(
    *, state: ServiceState, owner: User, spec: JobSpec, idempotency_key: str | None
) -> tuple[Job, bool]:
    with state.sessions() as session:
        if state.engine.dialect.name == "postgresql":
            # Every statement of a submit is atomic on its own (the job and its first
            # status row are one statement), so the transaction's BEGIN and COMMIT would
            # only add two round trips; in autocommit the job is durable when its INSERT
            # returns, still before anything is enqueued.
            session.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
        return submit_job(
            session, state=state, owner=owner, spec=spec, idempotency_key=idempotency_key
        )


def enqueue_after_commit(state: ServiceState, job: Job) -> None:
    """The committed job is in the outbox (its row says so); wake this process's
    dispatcher to send it now rather than at its next poll. If the broker is down the
    dispatcher keeps it and retries until the broker takes it."""
    if state.dispatcher is None:
        log.warning("job %s stays queued: no broker configured (RUDDER_REDIS_URL)", job.id)
        return
    state.dispatcher.wake()


# ---------------------------------------------------------------- listing


def encode_cursor(job: Job) -> str:
    return cursors.encode_cursor(job.created_at.isoformat(), job.id)


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    created_at, job_id = cursors.decode_cursor(cursor, (str, str))
    try:
        return datetime.fromisoformat(created_at), job_id
    except ValueError as exc:
        raise field_error("cursor", "is not a cursor returned by this API",
                          status_code=400) from exc


def list_jobs_page(
    session: Session, *, owner: User, statuses: list[str] | None, limit: int,
    cursor: str | None,
) -> tuple[list[Job], str | None]:
    """One page of the owner's jobs, newest first, and the cursor of the next page."""
    before = decode_cursor(cursor) if cursor else None
    rows = repositories.list_jobs(
        session, owner_id=owner.id, limit=limit + 1, statuses=statuses, before=before
    )
    page = rows[:limit]
    return page, encode_cursor(page[-1]) if len(rows) > limit else None


def finished_if_owned(session: Session, *, job_id: str, owner_id: str) -> bool:
    """Whether the owner's job is finished (SSE closes at once then), or a 404."""
    job = repositories.get_job(session, job_id=job_id, owner_id=owner_id) if is_id(
        job_id) else None
    if job is None:
        raise not_found("job", job_id)
    return JobStatus(job.status) in TERMINAL_STATUSES


def parse_status_filter(raw: list[str] | None) -> list[str] | None:
    if not raw:
        return None
    values = [v.strip() for item in raw for v in item.split(",") if v.strip()]
    allowed = {s.value for s in JobStatus}
    unknown = [v for v in values if v not in allowed]
    if unknown:
        raise field_error(
            "status", f"unknown status {', '.join(unknown)}; expected {', '.join(sorted(allowed))}"
        )
    return values


# ---------------------------------------------------------------- control


def _conflict(job: Job, action: str) -> ApiError:
    return ApiError(
        409, "invalid_state", f"cannot {action} a job that is {job.status}",
        details={"status": job.status},
    )


def _transition(
    session: Session, state: ServiceState, job: Job, to: JobStatus, src: JobStatus, reason: str
) -> bool:
    moved = transition_and_announce(session, state.channel, job_id=job.id, to_status=to,
                                    from_statuses=[src], reason=reason)
    session.refresh(job)
    return moved


def _require_channel(state: ServiceState) -> None:
    if state.channel is None:
        raise ApiError(503, "unavailable", "the live channel (Redis) is not configured")


def pause_job(session: Session, *, state: ServiceState, job: Job, user: User) -> JobControlPublic:
    if job.status == JobStatus.QUEUED and _transition(
        session, state, job, JobStatus.PAUSED, JobStatus.QUEUED, f"paused by {user.name}"
    ):
        return JobControlPublic(job_id=job.id, action="pause", status=job.status, pending=False)
    if job.status == JobStatus.PAUSED:
        return JobControlPublic(job_id=job.id, action="pause", status=job.status, pending=False)
    if job.status == JobStatus.RUNNING:
        _require_channel(state)
        assert state.channel is not None
        command_id = record_and_send(session, state=state, job=job,
                                     command=PauseCommand(requested_by=user.id,
                                                          reason=f"paused by {user.name}")).id
        return JobControlPublic(
            job_id=job.id, action="pause", status=job.status, command_id=command_id, pending=True
        )
    raise _conflict(job, "pause")


def resume_job(session: Session, *, state: ServiceState, job: Job, user: User) -> JobControlPublic:
    if job.status != JobStatus.PAUSED or not _transition(
        session, state, job, JobStatus.QUEUED, JobStatus.PAUSED, f"resumed by {user.name}"
    ):
        raise _conflict(job, "resume")
    enqueue_after_commit(state, job)
    return JobControlPublic(job_id=job.id, action="resume", status=job.status, pending=False)


def cancel_job(session: Session, *, state: ServiceState, job: Job, user: User) -> JobControlPublic:
    reason = f"cancelled by {user.name}"
    if job.status == JobStatus.CANCELLED:
        return JobControlPublic(job_id=job.id, action="cancel", status=job.status, pending=False)
    if job.status in (JobStatus.QUEUED, JobStatus.PAUSED) and _transition(
        session, state, job, JobStatus.CANCELLED, JobStatus(job.status), reason
    ):
        return JobControlPublic(job_id=job.id, action="cancel", status=job.status, pending=False)
    if job.status == JobStatus.RUNNING:
        _require_channel(state)
        assert state.channel is not None
        if state.channel.lease_owner(job.id) is None and _transition(
            # Nobody holds the lease, so no worker would ever read the command.
            session, state, job, JobStatus.CANCELLED, JobStatus.RUNNING, reason
        ):
            return JobControlPublic(
                job_id=job.id, action="cancel", status=job.status, pending=False
            )
        command_id = record_and_send(session, state=state, job=job,
                                     command=CancelCommand(requested_by=user.id, reason=reason)).id
        return JobControlPublic(
            job_id=job.id, action="cancel", status=job.status, command_id=command_id, pending=True
        )
    raise _conflict(job, "cancel")


# ---------------------------------------------------------------- deletion


def delete_job(session: Session, *, state: ServiceState, job: Job) -> None:
    """Forget a finished job: its rows, its checkpoints in object storage, its live keys.

    Rows go first (one commit): a listed job then always has its checkpoints. Objects
    follow; one that fails to go is logged and left for an operator, never a 500 after
    the job is already gone from the API.
    """
    if JobStatus(job.status) not in TERMINAL_STATUSES:
        raise ApiError(
            409, "invalid_state",
            f"cannot delete a job that is {job.status}; cancel it first",
            details={"status": job.status},
        )
    job_id = job.id
    repositories.delete_job(session, job_id=job_id)
    session.commit()
    try:
        state.store.delete_prefix(job_objects_prefix(job_id))
    except Exception:  # noqa: BLE001 - the job is gone; leftovers are debris, not an error
        log.exception("job %s deleted but its objects were not all removed", job_id)
    if state.channel is not None:
        try:
            state.channel.delete_job(job_id)
        except Exception:  # noqa: BLE001 - the keys expire or are trimmed anyway
            log.exception("job %s deleted but its live-channel keys remain", job_id)
