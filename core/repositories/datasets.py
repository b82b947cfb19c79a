"""Uploaded datasets and the jobs that use them.

Queries flush and never commit (see core/repositories/__init__.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from core.models import (
    Dataset,
    Job,
    JobStatus,
)


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


def update_dataset(session: Session, *, dataset_id: str, **fields: Any) -> None:
    session.execute(update(Dataset).where(Dataset.id == dataset_id).values(**fields))
    session.flush()
