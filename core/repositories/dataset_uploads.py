"""Chunked dataset uploads and their received parts.

Queries flush and never commit (see core/repositories/__init__.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from core.models import (
    Dataset,
    DatasetStatus,
    DatasetUpload,
    DatasetUploadPart,
    UploadStatus,
)


def create_upload(session: Session, *, owner_id: str, **fields: Any) -> DatasetUpload:
    upload = DatasetUpload(owner_id=owner_id, **fields)
    session.add(upload)
    session.flush()
    return upload


def get_upload(session: Session, *, upload_id: str, owner_id: str) -> DatasetUpload | None:
    return session.scalars(
        select(DatasetUpload).where(
            DatasetUpload.id == upload_id, DatasetUpload.owner_id == owner_id
        )
    ).one_or_none()


def list_upload_parts(session: Session, *, upload_id: str) -> list[DatasetUploadPart]:
    return list(session.scalars(
        select(DatasetUploadPart)
        .where(DatasetUploadPart.upload_id == upload_id)
        .order_by(DatasetUploadPart.number)
    ))


def record_upload_part(
    session: Session, *, upload_id: str, number: int, size: int, sha256: str, etag: str
) -> DatasetUploadPart:
    """Insert or replace part ``number`` (a client may send a part again on resume)."""
    session.execute(
        delete(DatasetUploadPart).where(
            DatasetUploadPart.upload_id == upload_id, DatasetUploadPart.number == number
        )
    )
    part = DatasetUploadPart(
        upload_id=upload_id, number=number, size=size, sha256=sha256, etag=etag
    )
    session.add(part)
    session.flush()
    return part


def forget_upload_part(session: Session, *, upload_id: str, number: int) -> None:
    session.execute(
        delete(DatasetUploadPart).where(
            DatasetUploadPart.upload_id == upload_id, DatasetUploadPart.number == number
        )
    )
    session.flush()


def claim_upload_for_completion(session: Session, *, upload_id: str) -> bool:
    """Move an open upload to ``completing``; False when another request got there first."""
    result = session.execute(
        update(DatasetUpload)
        .where(DatasetUpload.id == upload_id, DatasetUpload.status == UploadStatus.OPEN.value)
        .values(status=UploadStatus.COMPLETING.value)
    )
    session.flush()
    return bool(getattr(result, "rowcount", 0))


def delete_upload(session: Session, *, upload_id: str) -> None:
    session.execute(delete(DatasetUploadPart).where(DatasetUploadPart.upload_id == upload_id))
    session.execute(delete(DatasetUpload).where(DatasetUpload.id == upload_id))
    session.flush()


def bytes_held_by(session: Session, *, owner_id: str) -> int:
    """What counts against the owner's quota: stored data sets plus the declared size of
    uploads still open (so many parallel uploads cannot overshoot it)."""
    stored = session.scalar(
        select(func.coalesce(func.sum(Dataset.size), 0)).where(Dataset.owner_id == owner_id)
    )
    pending = session.scalar(
        select(func.coalesce(func.sum(DatasetUpload.total_size), 0)).where(
            DatasetUpload.owner_id == owner_id,
            DatasetUpload.status != UploadStatus.COMPLETED.value,
        )
    )
    return int(stored or 0) + int(pending or 0)


def open_uploads_created_before(session: Session, *, cutoff: datetime) -> list[DatasetUpload]:
    return list(session.scalars(
        select(DatasetUpload).where(
            DatasetUpload.status == UploadStatus.OPEN.value, DatasetUpload.created_at < cutoff
        ).limit(100)
    ))


def validations_sent_before(
    session: Session, *, cutoff: datetime
) -> list[tuple[str, datetime | None]]:
    """(id, sent at) of data sets still validating whose validation was sent before
    ``cutoff``."""
    rows = session.execute(
        select(Dataset.id, Dataset.validation_sent_at).where(
            Dataset.status == DatasetStatus.VALIDATING.value,
            Dataset.validation_sent_at < cutoff,
        ).limit(100)
    ).all()
    return [(str(dataset_id), sent_at) for dataset_id, sent_at in rows]


def mark_validation_sent(
    session: Session, *, dataset_id: str, previous: datetime | None, now: datetime
) -> bool:
    """Compare-and-set the send time: of several sweeps, exactly one re-sends."""
    condition = (Dataset.validation_sent_at.is_(None) if previous is None
                 else Dataset.validation_sent_at == previous)
    result = session.execute(
        update(Dataset).where(Dataset.id == dataset_id, condition)
        .values(validation_sent_at=now)
    )
    session.flush()
    return bool(getattr(result, "rowcount", 0))
