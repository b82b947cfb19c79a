"""Uploaded models: inspect (in the inspector process), store in object storage, then
record the row.

Nothing is stored for a refused upload: every check (model_inspection) runs first, then
the files go to object storage, then the row is committed (a row never points at a
missing object).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass

from sqlalchemy.orm import Session

from api.errors import ApiError, in_use, not_found
from api.services import quota
from api.services.inspector import InspectorUnavailable, unavailable_error
from api.services.model_inspection import ModelUploadError, inspect_upload, parse_input_shape
from api.state import ServiceState
from core import repositories
from core.models import JobStatus, UploadedModel, User, is_id, new_id
from core.storage import MODEL_META_FILE, MODEL_PARAMS_FILE, MODEL_SYMBOL_FILE, model_prefix

log = logging.getLogger(__name__)
INPUT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,127}$")
# A job in one of these may still read the model (a paused one when it resumes).
ACTIVE_STATUSES = (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.PAUSED)


@dataclass(frozen=True)
class ModelUpload:
    name: str
    symbol: bytes
    params: bytes | None
    input_shape: str
    input_name: str


def _too_large(field: str, limit: int) -> ApiError:
    return ApiError(
        413, "payload_too_large", f"{field}: the file exceeds the limit of {limit} bytes",
        details=[{"field": field, "message": f"exceeds the limit of {limit} bytes",
                  "limit_bytes": limit}],
    )


def _refused(exc: ModelUploadError) -> ApiError:
    status, code = (413, "model_too_large") if exc.too_large else (422, "invalid_model")
    return ApiError(status, code, f"{exc.field}: {exc.message}",
                    details=[{"field": exc.field, "message": exc.message}])


def store_model(
    session: Session, *, state: ServiceState, owner: User, upload: ModelUpload
) -> UploadedModel:
    limits = state.settings.limits
    if len(upload.symbol) > limits.max_symbol_bytes:
        raise _too_large("symbol", limits.max_symbol_bytes)
    if upload.params is not None and len(upload.params) > limits.max_upload_bytes:
        raise _too_large("params", limits.max_upload_bytes)
    try:
        if not INPUT_NAME.match(upload.input_name):
            raise ModelUploadError("input_name", "must be an MXNet variable name "
                                   "(letters, digits, _ . -), e.g. data")
        shape = parse_input_shape(upload.input_shape)
        summary = inspect_upload(state.inspector, symbol=upload.symbol, params=upload.params,
                                 input_name=upload.input_name, input_shape=shape)
    except ModelUploadError as exc:
        raise _refused(exc) from exc
    except InspectorUnavailable as exc:
        raise unavailable_error(exc) from exc

    # Quota (issue 25 item 8): a model's files count like data sets do.
    stored_bytes = len(upload.symbol) + len(upload.params or b"")
    quota.check(session, state=state, owner=owner, adding=stored_bytes, what="model upload")
    session.rollback()
    model_id = new_id()
    prefix = model_prefix(model_id)
    meta = {"input_name": summary.input_name, "input_shape": summary.input_shape}
    state.store.put(prefix + MODEL_SYMBOL_FILE, upload.symbol)
    if upload.params is not None:
        state.store.put(prefix + MODEL_PARAMS_FILE, upload.params)
    state.store.put(prefix + MODEL_META_FILE, json.dumps(meta).encode())
    try:
        quota.reserve(session, state=state, owner=owner, adding=stored_bytes,
                      what="model upload")
    except ApiError:
        state.store.delete_prefix(prefix)
        raise
    model = repositories.create_model(
        session,
        owner_id=owner.id,
        id=model_id,
        name=upload.name,
        storage_prefix=prefix,
        symbol_sha256=hashlib.sha256(upload.symbol).hexdigest(),
        symbol_size=len(upload.symbol),
        params_sha256=hashlib.sha256(upload.params).hexdigest() if upload.params else None,
        params_size=len(upload.params) if upload.params is not None else None,
        input_name=summary.input_name,
        input_shape=summary.input_shape,
        output_shapes=summary.output_shapes,
        ops=summary.ops,
        parameter_count=summary.parameter_count,
    )
    session.commit()
    return model


def get_owned_model(session: Session, *, owner: User, model_id: str) -> UploadedModel:
    """The owner's model; another user's id is a 404 like an unknown one."""
    model = repositories.get_model(
        session, model_id=model_id, owner_id=owner.id
    ) if is_id(model_id) else None
    if model is None:
        raise not_found("model", model_id)
    return model


def list_owned_models(session: Session, *, owner: User) -> list[UploadedModel]:
    return repositories.list_models(session, owner_id=owner.id)


def delete_model(session: Session, *, state: ServiceState, owner: User, model_id: str) -> None:
    model = get_owned_model(session, owner=owner, model_id=model_id)
    using = repositories.jobs_using_model(
        session, owner_id=owner.id, model_id=model_id, statuses=ACTIVE_STATUSES
    )
    if using:
        raise in_use("model", model_id, using)
    prefix = model.storage_prefix
    repositories.delete_model(session, model_id=model_id)
    session.commit()
    try:
        state.store.delete_prefix(prefix)
    except Exception:  # noqa: BLE001 - the row is gone; leftover objects are debris
        log.exception("model %s deleted but its objects under %s remain", model_id, prefix)
