"""Live learning-rate changes: validated, rate-limited, recorded, then sent to the worker."""

from __future__ import annotations

import logging
import math
from datetime import timedelta

from sqlalchemy.orm import Session

from api import telemetry
from api.errors import ApiError, field_error
from api.schemas.learning_rate import LearningRateUpdate
from api.state import ServiceState
from core import repositories
from core.models import TERMINAL_STATUSES, Job, JobStatus, LRChange, LRChangeMode, User, utcnow

log = logging.getLogger("rudder.api")


def _check_rate_limit(session: Session, *, state: ServiceState, job: Job) -> None:
    limits = state.settings.lr
    now = utcnow()
    window = timedelta(seconds=limits.window_seconds)
    recent = repositories.lr_change_times_since(session, job_id=job.id, since=now - window)
    if len(recent) >= limits.max_changes:
        oldest = recent[-limits.max_changes]
        retry_after = max(1, math.ceil((oldest + window - now).total_seconds()))
        raise ApiError(
            429,
            "rate_limited",
            f"at most {limits.max_changes} learning-rate changes per "
            f"{limits.window_seconds:g} s for one job; retry in {retry_after} s",
            details={"retry_after": retry_after},
            headers={"Retry-After": str(retry_after)},
        )


def request_change(
    session: Session, *, state: ServiceState, job: Job, user: User, body: LearningRateUpdate
) -> LRChange:
    if JobStatus(job.status) in TERMINAL_STATUSES:
        raise ApiError(
            409, "invalid_state", f"cannot change the learning rate of a {job.status} job",
            details={"status": job.status},
        )
    bounds = state.settings.lr
    if not bounds.min <= body.learning_rate <= bounds.max:
        raise field_error("learning_rate", f"must be between {bounds.min:g} and {bounds.max:g}")
    _check_rate_limit(session, state=state, job=job)
    change = repositories.create_lr_change(
        session,
        job_id=job.id,
        requested_lr=body.learning_rate,
        mode=LRChangeMode(body.mode),
        requested_by=user.id,
    )
    session.commit()
    telemetry.LR_CHANGES.inc()
    # After commit: the worker confirms against the row, so the row must exist first.
    # A job that is not running yet applies its pending changes from the DB when it starts.
    if state.channel is not None:
        try:
            state.channel.send_command(
                job.id,
                "set_lr",
                {"change_id": change.id, "learning_rate": change.requested_lr,
                 "mode": change.mode},
                command_id=change.id,
            )
        except Exception:
            log.exception("lr change %s stored but not sent to job %s", change.id, job.id)
    return change
