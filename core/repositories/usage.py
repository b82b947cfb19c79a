"""What a user stores, by kind, and the lock that makes a quota check and the insert it
allows one atomic step.

Queries flush and never commit (see core/repositories/__init__.py)."""

from __future__ import annotations

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from core.models import Checkpoint, Dataset, DatasetUpload, Job, UploadedModel, UploadStatus, User


def lock_user_storage(session: Session, *, user_id: str) -> None:
    """Hold the user's row until the transaction ends, so two requests of one user that
    check the quota and then insert run one after the other. A no-op UPDATE: PostgreSQL
    takes the row lock; SQLite takes its write lock before the sums are read."""
    session.execute(update(User).where(User.id == user_id).values(id=User.id))


def upload_bytes_by_kind(session: Session, *, owner_id: str) -> dict[str, int]:
    """What counts against the quota: stored data sets, the declared size of uploads not
    yet completed (reserved when they start), uploaded models (symbol + params)."""
    datasets = session.scalar(
        select(func.coalesce(func.sum(Dataset.size), 0)).where(Dataset.owner_id == owner_id)
    )
    reserved = session.scalar(
        select(func.coalesce(func.sum(DatasetUpload.total_size), 0)).where(
            DatasetUpload.owner_id == owner_id,
            DatasetUpload.status != UploadStatus.COMPLETED.value,
        )
    )
    models = session.scalar(
        select(func.coalesce(
            func.sum(UploadedModel.symbol_size + func.coalesce(UploadedModel.params_size, 0)),
            0,
        )).where(UploadedModel.owner_id == owner_id)
    )
    return {"datasets": int(datasets or 0), "uploads_in_progress": int(reserved or 0),
            "models": int(models or 0)}


def bytes_held_by(session: Session, *, owner_id: str) -> int:
    """The bytes that count against the owner's quota (see upload_bytes_by_kind)."""
    return sum(upload_bytes_by_kind(session, owner_id=owner_id).values())


def checkpoint_bytes_of(session: Session, *, owner_id: str) -> int:
    """The checkpoints the owner's jobs keep (written by the service, shown, not counted)."""
    total = session.scalar(
        select(func.coalesce(func.sum(Checkpoint.size), 0))
        .join(Job, Job.id == Checkpoint.job_id).where(Job.owner_id == owner_id)
    )
    return int(total or 0)


def job_ids_of(session: Session, *, owner_id: str, limit: int) -> list[str]:
    """The owner's newest jobs' ids (where exports may have been written)."""
    return [str(job_id) for job_id in session.scalars(
        select(Job.id).where(Job.owner_id == owner_id).order_by(Job.created_at.desc())
        .limit(limit)
    )]
