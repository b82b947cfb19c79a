"""Uploaded models (MXNet symbol + params) and the jobs that use them.

Queries flush and never commit (see core/repositories/__init__.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from core.models import Job, JobStatus, UploadedModel


def create_model(session: Session, *, owner_id: str, **fields: Any) -> UploadedModel:
    model = UploadedModel(owner_id=owner_id, **fields)
    session.add(model)
    session.flush()
    return model


def get_model(
    session: Session, *, model_id: str, owner_id: str | None = None
) -> UploadedModel | None:
    query = select(UploadedModel).where(UploadedModel.id == model_id)
    if owner_id is not None:
        query = query.where(UploadedModel.owner_id == owner_id)
    return session.scalars(query).one_or_none()


def list_models(session: Session, *, owner_id: str, limit: int = 200) -> list[UploadedModel]:
    query = select(UploadedModel).where(UploadedModel.owner_id == owner_id)
    return list(session.scalars(query.order_by(UploadedModel.created_at.desc()).limit(limit)))


def jobs_using_model(
    session: Session, *, owner_id: str, model_id: str, statuses: Sequence[JobStatus]
) -> list[str]:
    """Ids of the owner's jobs in ``statuses`` whose spec's ``model`` is ``{model: id}``."""
    rows = session.execute(
        select(Job.id, Job.spec).where(
            Job.owner_id == owner_id, Job.status.in_([s.value for s in statuses])
        )
    ).all()
    return [
        str(job_id) for job_id, spec in rows
        if isinstance((spec or {}).get("model"), dict) and spec["model"].get("model") == model_id
    ]


def delete_model(session: Session, *, model_id: str) -> None:
    session.execute(delete(UploadedModel).where(UploadedModel.id == model_id))
    session.flush()
