"""Chunked dataset uploads and their received parts.

Queries flush and never commit (see core/repositories/__init__.py)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from core.models import Dataset, DatasetUpload, DatasetUploadPart, UploadStatus


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
