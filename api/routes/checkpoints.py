from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import StreamingResponse

from api.cursors import INT64_MAX
from api.deps import JobDep, SessionDep, StoreDep
from api.errors import not_found
from api.schemas.checkpoints import CheckpointFilePublic, CheckpointPublic, CheckpointsPublic
from core import repositories
from core.models import Checkpoint
from core.storage import CheckpointFileName, ObjectNotFound

router = APIRouter(prefix="/v1/jobs/{job_id}/checkpoints", tags=["checkpoints"])
CheckpointFile = CheckpointFileName


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
    params = row.files.get("params.npz", {})
    return CheckpointPublic(
        step=row.step,
        epoch=row.epoch,
        sha256=params.get("sha256"),
        size=row.size,
        created_at=row.created_at,
        files=files,
    )


@router.get("")
def list_checkpoints(job: JobDep, session: SessionDep) -> CheckpointsPublic:
    """Complete checkpoints (their meta.json was written before the row), oldest first."""
    rows = repositories.list_checkpoints(session, job_id=job.id)
    return CheckpointsPublic(job_id=job.id, data=[_public(job.id, r) for r in rows])


@router.get("/{step}/files/{name}", response_class=StreamingResponse)
def download_checkpoint_file(
    job: JobDep,
    step: Annotated[int, Path(ge=0, le=INT64_MAX)],
    name: CheckpointFile,
    session: SessionDep,
    store: StoreDep,
) -> StreamingResponse:
    """Stream ``params.npz``, ``trainer.npz`` or ``meta.json`` from object storage."""
    row = repositories.get_checkpoint(session, job_id=job.id, step=step)
    if row is None:
        raise not_found("checkpoint", f"{job.id}@{step}")
    key = row.key_prefix.rstrip("/") + "/" + name  # the prefix the worker recorded
    sha256 = row.files.get(name, {}).get("sha256")
    session.close()  # don't hold a database connection for the whole download
    try:
        size = store.size(key)
        chunks = store.stream(key)
    except ObjectNotFound as exc:
        raise not_found("checkpoint file", f"{step}/{name}") from exc
    headers = {
        "Content-Length": str(size),
        "Content-Disposition": f'attachment; filename="{job.id}-{step:010d}-{name}"',
    }
    if sha256:
        headers["X-Checksum-SHA256"] = sha256
        headers["ETag"] = f'"{sha256}"'
    media_type = "application/json" if name.endswith(".json") else "application/octet-stream"
    return StreamingResponse(chunks, media_type=media_type, headers=headers)
