"""Chunked dataset uploads and their received parts.

Queries flush and never commit (see core/repositories/__init__.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from core.models import (
    Dataset,
    DatasetStatus,
    DatasetUpload,
    DatasetUploadPart,
    UploadStatus,
    utcnow,
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


def record_upload_part_if_open(
    session: Session, *, upload_id: str, number: int, size: int, sha256: str, stored_as: str
) -> tuple[bool, str | None]:
    """Make ``stored_as`` part ``number`` of the upload, only while the upload is open.

    The no-op UPDATE locks the upload's row (PostgreSQL) or takes the write lock (SQLite)
    and succeeds only on an open upload: a completion, which claims the row with an
    UPDATE of its own, either sees this part or makes this call fail, never half of
    each. Returns (recorded, what the part was stored as before: the caller drops it).
    """
    locked = session.execute(
        update(DatasetUpload)
        .where(DatasetUpload.id == upload_id, DatasetUpload.status == UploadStatus.OPEN.value)
        .values(status=DatasetUpload.status)
    )
    if not getattr(locked, "rowcount", 0):
        return False, None
    previous = session.scalar(
        select(DatasetUploadPart.stored_as).where(
            DatasetUploadPart.upload_id == upload_id, DatasetUploadPart.number == number
        )
    )
    session.execute(
        delete(DatasetUploadPart).where(
            DatasetUploadPart.upload_id == upload_id, DatasetUploadPart.number == number
        )
    )
    session.add(DatasetUploadPart(upload_id=upload_id, number=number, size=size,
                                  sha256=sha256, stored_as=stored_as))
    session.flush()
    return True, previous


def forget_upload_part(session: Session, *, upload_id: str, number: int) -> None:
    session.execute(
        delete(DatasetUploadPart).where(
            DatasetUploadPart.upload_id == upload_id, DatasetUploadPart.number == number
        )
    )
    session.flush()


def claim_upload_for_completion(session: Session, *, upload_id: str) -> bool:
    """Move an open upload to ``completing``; False when another request got there first."""
    return set_upload_status(session, upload_id=upload_id, from_status=UploadStatus.OPEN,
                             to_status=UploadStatus.COMPLETING)


def set_upload_status(session: Session, *, upload_id: str, from_status: UploadStatus,
                      to_status: UploadStatus) -> bool:
    """Compare-and-set the upload's status; False when it was not ``from_status``."""
    result = session.execute(
        update(DatasetUpload)
        .where(DatasetUpload.id == upload_id, DatasetUpload.status == from_status.value)
        .values(status=to_status.value)
    )
    session.flush()
    return bool(getattr(result, "rowcount", 0))


def delete_upload(session: Session, *, upload_id: str) -> bool:
    """Delete an open upload and its parts (releasing its quota reservation); False when
    it is not open (being completed, completed, or gone)."""
    result = session.execute(
        delete(DatasetUpload)
        .where(DatasetUpload.id == upload_id, DatasetUpload.status == UploadStatus.OPEN.value)
    )
    if not getattr(result, "rowcount", 0):
        return False
    session.execute(delete(DatasetUploadPart).where(DatasetUploadPart.upload_id == upload_id))
    session.flush()
    return True


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


def mark_validation_started(session: Session, *, dataset_id: str) -> None:
    """A validation worker took the data set up (it was queued until now)."""
    session.execute(
        update(Dataset).where(Dataset.id == dataset_id).values(validation_started_at=utcnow())
    )
    session.flush()
