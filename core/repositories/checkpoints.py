"""Checkpoint rows, and deleting a finished job with them.

Queries flush and never commit (see core/repositories/__init__.py)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    delete,
    select,
)
from sqlalchemy.orm import Session

from core.models import (
    AbandonedMetricPoint,
    Checkpoint,
    Job,
    JobCommand,
    JobStatusEvent,
    MetricPoint,
)


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


def delete_checkpoints_after(session: Session, *, job_id: str, step: int) -> list[int]:
    """Forget the checkpoint rows after ``step`` (a rollback); returns their steps."""
    steps = list(session.scalars(select(Checkpoint.step).where(
        Checkpoint.job_id == job_id, Checkpoint.step > step)))
    delete_checkpoints(session, job_id=job_id, steps=steps)
    return sorted(steps)


def delete_job(session: Session, *, job_id: str) -> None:
    """A job's rows and everything hanging off them (children first: SQLite enforces
    ON DELETE CASCADE only when told to, so the order does not rely on it)."""
    for child in (MetricPoint, AbandonedMetricPoint, JobCommand, Checkpoint, JobStatusEvent):
        session.execute(delete(child).where(child.job_id == job_id))
    session.execute(delete(Job).where(Job.id == job_id))
    session.flush()
