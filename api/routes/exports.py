"""A job's network in MXNet's format: ``-symbol.json`` + ``-0000.params``.

Two plain files rather than one zip: each streams from object storage as it is, and the
pair is what ``mx.gluon.SymbolBlock.imports`` and ``mx.model.load_checkpoint`` read. The
worker writes them when the job succeeds (workers/networks.export_network); any kept
checkpoint of a job in any state is exported on request (api/services/exports.py).
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from api.cursors import INT64_MAX
from api.deps import JobDep, SessionDep, StateDep, StoreDep
from api.errors import not_found
from api.schemas.exports import ExportPublic
from api.services import exports as service
from core.storage import ObjectNotFound, job_export_prefix

router = APIRouter(prefix="/v1/jobs/{job_id}/export", tags=["checkpoints"])
ExportFileName = Literal["model-symbol.json", "model-0000.params"]
StepQuery = Annotated[int | None, Query(
    ge=0, le=INT64_MAX, description="a kept checkpoint's step (default: the export written "
    "when the job succeeded, else the latest kept checkpoint)")]


@router.get("")
def describe_export(job: JobDep, session: SessionDep, state: StateDep,
                    step: StepQuery = None) -> ExportPublic:
    """The job's network at a kept checkpoint as MXNet files, with download links (made on
    the first request for that checkpoint)."""
    if step is None:
        latest = service.latest_step(session, job)
        final = service.final_export(state.store, job, latest)
        if final is not None:
            return final
    return service.export_checkpoint(session, state=state, job=job, step=step)[0]


@router.get("/{name}", response_class=StreamingResponse)
def download_export_file(job: JobDep, name: ExportFileName, session: SessionDep,
                         state: StateDep, store: StoreDep, step: StepQuery = None
                         ) -> StreamingResponse:
    """Stream ``model-symbol.json`` or ``model-0000.params`` (of ``step``'s checkpoint)."""
    if step is None:
        key = job_export_prefix(job.id) + name
        missing = "(written when a job succeeds; pass step= for a checkpoint's)"
    else:
        _, prefix = service.export_checkpoint(session, state=state, job=job, step=step)
        key = prefix + name
        missing = f"at step {step} (deleted meanwhile)"
    session.close()  # don't hold a database connection for the whole download
    try:
        size = store.size(key)
        chunks = store.stream(key)
    except ObjectNotFound as exc:
        raise not_found("export of job", f"{job.id} {missing}") from exc
    # The job's id, not its name: a header is latin-1 and a name may be any text.
    stem = job.id if step is None else f"{job.id}-{step:010d}"
    download_name = f"{stem}-{name.removeprefix('model-')}"
    headers = {"Content-Length": str(size),
               "Content-Disposition": f'attachment; filename="{download_name}"'}
    media_type = "application/json" if name.endswith(".json") else "application/octet-stream"
    return StreamingResponse(chunks, media_type=media_type, headers=headers)
