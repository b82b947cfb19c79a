"""Checkpoints as the api shows them: listings with download links, file lookup."""

from __future__ import annotations

from sqlalchemy.orm import Session

from api.errors import not_found
from api.schemas.checkpoints import CheckpointFilePublic, CheckpointPublic, CheckpointsPublic
from core import repositories
from core.models import Checkpoint, Job
from core.storage import PARAMS_FILE, CheckpointFileName


def _public(job_id: str, row: Checkpoint) -> CheckpointPublic:
    files = [
        CheckpointFilePublic(
            name=name,
            sha256=info.get("sha256"),
            size=info.get("size"),
            url=f"/v1/jobs/{job_id}/checkpoints/{row.step}/files/{name}",
        )
        for name, info in sorted(row.files.items())
    ]
    params = row.files.get(PARAMS_FILE, {})
    return CheckpointPublic(
        step=row.step,
        epoch=row.epoch,
        sha256=params.get("sha256"),
        size=row.size,
        created_at=row.created_at,
        files=files,
    )


def list_checkpoints(session: Session, *, job: Job) -> CheckpointsPublic:
    rows = repositories.list_checkpoints(session, job_id=job.id)
    return CheckpointsPublic(job_id=job.id, data=[_public(job.id, r) for r in rows])


def checkpoint_file(
    session: Session, *, job: Job, step: int, name: CheckpointFileName
) -> tuple[str, str | None]:
    """``(object key, sha256)`` of one file of the checkpoint at ``step``, or a 404."""
    row = repositories.get_checkpoint(session, job_id=job.id, step=step)
    if row is None:
        raise not_found("checkpoint", f"{job.id}@{step}")
    key = row.key_prefix.rstrip("/") + "/" + name  # the prefix the worker recorded
    return key, row.files.get(name, {}).get("sha256")
