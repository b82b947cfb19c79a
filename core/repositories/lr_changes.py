"""Learning-rate changes: requested, applied at a step, or rejected.

Queries flush and never commit (see core/repositories/__init__.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    select,
    update,
)
from sqlalchemy.orm import Session

from core.models import (
    LRChange,
    LRChangeMode,
    LRChangeStatus,
    utcnow,
)


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
