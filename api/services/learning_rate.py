"""Live learning-rate changes: validated, rate-limited, recorded, then sent to the worker."""

from __future__ import annotations

import logging
import math
import threading
from datetime import timedelta

import redis
from sqlalchemy.orm import Session

from api import telemetry
from api.errors import ApiError, field_error
from api.schemas.learning_rate import (
    LearningRateChangePublic,
    LearningRatePreview,
    LearningRatePublic,
    LearningRateUpdate,
)
from api.services.inspector import InspectionFailed, InspectorUnavailable
from api.state import ServiceState
from core import repositories
from core.channel import Channel
from core.config import LearningRateLimits
from core.events import SetLRCommand
from core.inspection import PreviewSchedule
from core.jobspec import JobSpec
from core.models import TERMINAL_STATUSES, Job, JobStatus, LRChange, LRChangeMode, User, utcnow

log = logging.getLogger("rudder.api")

# Without Redis (RUDDER_REDIS_URL unset: the single-process development setup) the limit
# is counted in the database, and this lock makes count-then-insert one step within the
# process. With Redis the limit lives there and holds across any number of api processes.
_COUNT_IN_DB = threading.Lock()


def _rate_limited(limits: LearningRateLimits, wait_seconds: float) -> ApiError:
    retry_after = max(1, math.ceil(wait_seconds))
    return ApiError(
        429,
        "rate_limited",
        f"at most {limits.max_changes} learning-rate changes per "
        f"{limits.window_seconds:g} s for one job; retry in {retry_after} s",
        details={"retry_after": retry_after},
        headers={"Retry-After": str(retry_after)},
    )


def _store(session: Session, *, job: Job, user: User, body: LearningRateUpdate) -> LRChange:
    change = repositories.create_lr_change(
        session,
        job_id=job.id,
        requested_lr=body.learning_rate,
        mode=LRChangeMode(body.mode),
        requested_by=user.id,
    )
    session.commit()
    return change


def _store_admitted_by_redis(
    session: Session, *, channel: Channel, job: Job, user: User, body: LearningRateUpdate,
    limits: LearningRateLimits,
) -> LRChange:
    try:
        admission = channel.admit_lr_change(
            job.id, max_changes=limits.max_changes, window_seconds=limits.window_seconds
        )
    except redis.RedisError as exc:
        # Fail closed with a retryable 503 rather than store the change unlimited: a
        # running worker hears of changes only through Redis, so a change accepted now
        # would sit "pending" unseen until the job restarts, which is worse than a retry.
        log.warning("lr change for job %s refused: Redis is not answering (%s)", job.id, exc)
        raise ApiError(
            503, "unavailable",
            "the live channel (Redis) is not answering; the change was not recorded, "
            "retry shortly",
        ) from exc
    if not admission.admitted:
        raise _rate_limited(limits, admission.retry_after_s)
    try:
        return _store(session, job=job, user=user, body=body)
    except Exception:
        # Not stored, so it must not count against the job's limit.
        try:
            channel.release_lr_change(job.id, admission.token)
        except redis.RedisError:
            log.warning("could not give back the rate-limit slot of job %s", job.id)
        raise


def _store_counted_in_db(
    session: Session, *, job: Job, user: User, body: LearningRateUpdate,
    limits: LearningRateLimits,
) -> LRChange:
    with _COUNT_IN_DB:
        now = utcnow()
        window = timedelta(seconds=limits.window_seconds)
        recent = repositories.lr_change_times_since(session, job_id=job.id, since=now - window)
        if len(recent) >= limits.max_changes:
            blocking = recent[-limits.max_changes]
            raise _rate_limited(limits, (blocking + window - now).total_seconds())
        return _store(session, job=job, user=user, body=body)


def request_change(
    session: Session, *, state: ServiceState, job: Job, user: User, body: LearningRateUpdate
) -> LRChange:
    if JobStatus(job.status) in TERMINAL_STATUSES:
        raise ApiError(
            409, "invalid_state", f"cannot change the learning rate of a {job.status} job",
            details={"status": job.status},
        )
    limits = state.settings.lr
    if not limits.min <= body.learning_rate <= limits.max:
        raise field_error("learning_rate", f"must be between {limits.min:g} and {limits.max:g}")
    if state.channel is None:
        change = _store_counted_in_db(session, job=job, user=user, body=body, limits=limits)
    else:
        change = _store_admitted_by_redis(
            session, channel=state.channel, job=job, user=user, body=body, limits=limits
        )
    telemetry.LR_CHANGES.inc()
    # After commit: the worker confirms against the row, so the row must exist first.
    # A job that is not running yet applies its pending changes from the DB when it starts.
    if state.channel is not None:
        try:
            state.channel.send_command(job.id, SetLRCommand(
                command_id=change.id, learning_rate=change.requested_lr, mode=body.mode,
                requested_by=user.id,
            ))
        except Exception:
            log.exception("lr change %s stored but not sent to job %s", change.id, job.id)
    return change


def describe(session: Session, *, job: Job) -> LearningRatePublic:
    """The lr in effect, the schedule, and every change with its outcome."""
    spec = JobSpec.model_validate(job.spec)
    changes = repositories.list_lr_changes(session, job_id=job.id)
    return LearningRatePublic(
        job_id=job.id,
        learning_rate=job.current_lr,
        initial_learning_rate=spec.initial_learning_rate(),
        schedule=spec.lr_scheduler.model_dump(mode="json") if spec.lr_scheduler else None,
        changes=[LearningRateChangePublic.model_validate(c) for c in changes],
    )


def preview_change(
    session: Session, *, state: ServiceState, job: Job, body: LearningRateUpdate
) -> tuple[LearningRatePreview | None, str | None]:
    """The schedule after the change, from the job's spec and last reported step: the
    engine's own schedule formulas (engine.lr_scheduler.preview_live_change) evaluated on
    a fresh scheduler, in the inspector process (the api never loads the engine).
    Returns (preview, warning); the warning is the reason the worker will reject it (the
    optimizer raises the same message)."""
    spec = JobSpec.model_validate(job.spec)
    overridden = any(
        c.mode == LRChangeMode.OVERRIDE and c.status == "applied"
        for c in repositories.list_lr_changes(session, job_id=job.id)
    )
    scheduler, params = None, {}
    if spec.lr_scheduler is not None and not overridden:
        scheduler, params = spec.lr_scheduler.type, dict(spec.lr_scheduler.params)
        params.setdefault("base_lr", spec.initial_learning_rate() or 0.01)
    question = PreviewSchedule(scheduler=scheduler, params=params, step=job.step,
                               learning_rate=body.learning_rate, mode=body.mode)
    try:
        answer = state.inspector.check(question).schedule
    except (InspectorUnavailable, InspectionFailed) as exc:
        return None, f"cannot preview the schedule now ({exc})"
    if answer is None or answer.preview is None:
        return None, answer.warning if answer else None
    return LearningRatePreview(at_step=job.step, **answer.preview), None
