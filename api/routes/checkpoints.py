from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import StreamingResponse

from api.cursors import INT64_MAX
from api.deps import JobDep, SessionDep, StoreDep
from api.errors import not_found
from api.schemas.checkpoints import CheckpointsPublic
from api.services import checkpoints as service
from core.storage import CheckpointFileName, ObjectNotFound

router = APIRouter(prefix="/v1/jobs/{job_id}/checkpoints", tags=["checkpoints"])
CheckpointFile = CheckpointFileName


@router.get("")
def list_checkpoints(job: JobDep, session: SessionDep) -> CheckpointsPublic:
    """Complete checkpoints (their meta.json was written before the row), oldest first."""
    return service.list_checkpoints(session, job=job)


@router.get("/{step}/files/{name}", response_class=StreamingResponse)
def download_checkpoint_file(
    job: JobDep,
    step: Annotated[int, Path(ge=0, le=INT64_MAX)],
    name: CheckpointFile,
    session: SessionDep,
    store: StoreDep,
) -> StreamingResponse:
    """Stream ``params.npz``, ``trainer.npz`` or ``meta.json`` from object storage."""
    key, sha256 = service.checkpoint_file(session, job=job, step=step, name=name)
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
