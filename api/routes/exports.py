"""A succeeded job's network in MXNet's format: ``-symbol.json`` + ``-0000.params``.

Two plain files rather than one zip: each streams from object storage as it is, and the
pair is what ``mx.gluon.SymbolBlock.imports`` and ``mx.model.load_checkpoint`` read. The
worker writes them when the job succeeds (workers/networks.export_network).
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from api.deps import JobDep, StoreDep
from api.errors import not_found
from api.schemas.checkpoints import CheckpointFilePublic
from api.schemas.exports import ExportPublic
from core.storage import MODEL_PARAMS_FILE, MODEL_SYMBOL_FILE, ObjectNotFound, job_export_prefix

router = APIRouter(prefix="/v1/jobs/{job_id}/export", tags=["checkpoints"])
ExportFileName = Literal["model-symbol.json", "model-0000.params"]


@router.get("")
def describe_export(job: JobDep, store: StoreDep) -> ExportPublic:
    """The exported files of a succeeded job, with download links."""
    prefix = job_export_prefix(job.id)
    files = []
    for name in (MODEL_SYMBOL_FILE, MODEL_PARAMS_FILE):
        try:
            size = store.size(prefix + name)
        except ObjectNotFound:
            raise not_found("export of job", f"{job.id} (written when a job succeeds)") from None
        files.append(CheckpointFilePublic(name=name, sha256=None, size=size,
                                          url=f"/v1/jobs/{job.id}/export/{name}"))
    return ExportPublic(job_id=job.id, format="mxnet", files=files)


@router.get("/{name}", response_class=StreamingResponse)
def download_export_file(job: JobDep, name: ExportFileName, store: StoreDep) -> StreamingResponse:
    """Stream ``model-symbol.json`` or ``model-0000.params``."""
    key = job_export_prefix(job.id) + name
    try:
        size = store.size(key)
        chunks = store.stream(key)
    except ObjectNotFound as exc:
        raise not_found("export of job", f"{job.id} (written when a job succeeds)") from exc
    # The job's id, not its name: a header is latin-1 and a name may be any text.
    download_name = f"{job.id}-{name.removeprefix('model-')}"
    headers = {"Content-Length": str(size),
               "Content-Disposition": f'attachment; filename="{download_name}"'}
    media_type = "application/json" if name.endswith(".json") else "application/octet-stream"
    return StreamingResponse(chunks, media_type=media_type, headers=headers)
