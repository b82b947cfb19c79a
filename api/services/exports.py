"""A job's network in MXNet's format, from any kept checkpoint (issue 26).

A succeeded job's final network is written by its worker (workers.networks.export_network,
under ``job_export_prefix``). Any other kept checkpoint, of a job in any state (cancelled
and failed ones included), is exported on request by the api's inspector process, which
makes the spec's network as the worker does and loads the checkpoint's ``params.npz``
into it: the api itself never loads the engine. The files are kept beside the final
export (``.../export/{step:010d}-{sha256}/``), so a second request, and the downloads,
only read them back; they go with the job when it is deleted (``rudder usage`` shows
them with the job's checkpoints).
"""

from __future__ import annotations

from pydantic import ValidationError
from sqlalchemy.orm import Session

from api.errors import ApiError, field_error, not_found
from api.schemas.checkpoints import CheckpointFilePublic
from api.schemas.exports import ExportPublic
from api.services.inspector import InspectionFailed, InspectorUnavailable, unavailable_error
from api.state import ServiceState
from core import repositories
from core.inspection import ExportCheckpoint, UploadedGraph
from core.jobspec import parse_spec
from core.model_forms import UploadedModelRef
from core.models import Checkpoint, Job
from core.storage import (
    MODEL_PARAMS_FILE,
    MODEL_SYMBOL_FILE,
    PARAMS_FILE,
    ObjectNotFound,
    ObjectStore,
    job_export_prefix,
    model_prefix,
)

EXPORT_FILES = (MODEL_SYMBOL_FILE, MODEL_PARAMS_FILE)


def checkpoint_export_prefix(job_id: str, row: Checkpoint) -> str:
    """Where the export of the checkpoint ``row`` is kept. Named by its params' sha256 as
    well as its step: after a rollback, the step may be checkpointed again with other
    weights, and an export made before must not stand for it."""
    sha256 = str(row.files.get(PARAMS_FILE, {}).get("sha256") or "unknown")[:16]
    return f"{job_export_prefix(job_id)}{row.step:010d}-{sha256}/"


def final_export(store: ObjectStore, job: Job, step: int | None) -> ExportPublic | None:
    """The export the worker wrote when the job succeeded, if there is one."""
    prefix = job_export_prefix(job.id)
    try:
        sizes = [store.size(prefix + name) for name in EXPORT_FILES]
    except ObjectNotFound:
        return None
    return _public(job, step, sizes, query="")


def latest_step(session: Session, job: Job) -> int | None:
    latest = repositories.latest_checkpoint(session, job_id=job.id)
    return None if latest is None else latest.step


def export_checkpoint(session: Session, *, state: ServiceState, job: Job,
                      step: int | None) -> tuple[ExportPublic, str]:
    """The checkpoint at ``step`` (None: the latest kept one) in MXNet's format, made on
    the first request; and the storage prefix of its files."""
    row = kept_checkpoint(session, job, step)
    store = state.store
    prefix = checkpoint_export_prefix(job.id, row)
    try:
        sizes = [store.size(prefix + name) for name in EXPORT_FILES]
    except ObjectNotFound:
        sizes = _make(session, state, job, row, prefix)
    return _public(job, row.step, sizes, query=f"?step={row.step}"), prefix


def kept_checkpoint(session: Session, job: Job, step: int | None) -> Checkpoint:
    """The kept checkpoint at ``step`` (None: the latest); else a 404 that names ``step``
    and lists the steps that can be exported."""
    kept = repositories.list_checkpoints(session, job_id=job.id)
    if not kept:
        message = (f"job {job.id} has no checkpoint to export yet (a job checkpoints every "
                   "checkpoint.every_steps steps, and when it is paused or finishes)")
        raise ApiError(404, "not_found", f"step: {message}",
                       details=[{"field": "step", "message": message, "kept_steps": []}])
    if step is None:
        return kept[-1]
    found = next((row for row in kept if row.step == step), None)
    if found is None:
        steps = [row.step for row in kept]
        message = (f"no kept checkpoint at step {step}; kept steps: "
                   f"{', '.join(map(str, steps))}")
        raise ApiError(404, "not_found", f"step: {message}",
                       details=[{"field": "step", "message": message, "kept_steps": steps}])
    return found


def _make(session: Session, state: ServiceState, job: Job, row: Checkpoint,
          prefix: str) -> list[int]:
    """Ask the inspector for the files and store them; their sizes."""
    try:
        spec = parse_spec(dict(job.spec))
    except ValidationError as exc:
        raise ApiError(409, "invalid_state", f"the job's spec no longer validates, so its "
                       f"network cannot be made: {exc.errors()[0]['msg']}") from None
    uploaded = None
    if isinstance(spec.model, UploadedModelRef):
        model = repositories.get_model(session, model_id=spec.model.model,
                                       owner_id=job.owner_id)
        if model is None:
            raise field_error("model.model", f"model {spec.model.model} was deleted: its "
                              "graph is needed to export the job's network", status_code=409)
        symbol = state.store.get(model_prefix(model.id) + MODEL_SYMBOL_FILE).decode()
        uploaded = UploadedGraph(symbol=symbol, input_name=model.input_name,
                                 input_shape=list(model.input_shape), params=False)
    params_key = row.key_prefix.rstrip("/") + "/" + PARAMS_FILE  # as the worker recorded
    session.close()  # no database connection held while the inspector works
    try:
        params = state.store.get(params_key)
    except ObjectNotFound:
        raise not_found("checkpoint", f"{job.id}@{row.step} (deleted meanwhile)") from None
    question = ExportCheckpoint(model=spec.model, uploaded=uploaded, params_size=len(params))
    try:
        answer, params_file = state.inspector.export_checkpoint(question, params)
    except InspectionFailed as exc:
        raise ApiError(413, "payload_too_large", f"the checkpoint at step {row.step} could "
                       f"not be exported: {exc.reason}") from None
    except InspectorUnavailable as exc:
        raise unavailable_error(exc) from None
    if answer.refused is not None:
        field, why = answer.refused.field, (f"the checkpoint at step {row.step} cannot be "
                                            f"exported: {answer.refused.message}")
        raise ApiError(409, "invalid_state", f"{field}: {why}",
                       details=[{"field": field, "message": why}])
    assert answer.exported is not None and params_file is not None
    # The symbol last: both files are there once it is (a request that finds it reads
    # back what an earlier one made; two at once write the same bytes).
    state.store.put(prefix + MODEL_PARAMS_FILE, params_file)
    symbol_file = answer.exported.symbol.encode()
    state.store.put(prefix + MODEL_SYMBOL_FILE, symbol_file)
    return [len(symbol_file), len(params_file)]


def _public(job: Job, step: int | None, sizes: list[int], *, query: str) -> ExportPublic:
    files = [CheckpointFilePublic(name=name, sha256=None, size=size,
                                  url=f"/v1/jobs/{job.id}/export/{name}{query}")
             for name, size in zip(EXPORT_FILES, sizes, strict=True)]
    return ExportPublic(job_id=job.id, format="mxnet", step=step, files=files)
