"""At submit: does the spec's model build for its training data? (issues 12, 26)

Every data source's record shape is known at submit: a built-in set's from its transforms,
an uploaded table's from validation, an uploaded image set's (RecordIO, image archive)
from its image size and the spec's transforms, which always end in a CHW tensor. The
inspector process then makes the network of any model form as the worker does and infers
its shapes for one batch (api/services/inspector.py): a layer that cannot take its input,
a Reshape that cannot apply, an uploaded graph whose hard-coded shapes do not fit, is a
422 naming the field, not a failed job minutes later.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from sqlalchemy.orm import Session

from api.errors import field_error
from api.services.inspector import InspectionFailed, InspectorUnavailable, unavailable_error
from api.state import ServiceState
from core import model_size, repositories, transform_spec
from core.inspection import CheckModel, ModelFit, UploadedGraph
from core.jobspec import IMAGE_LAYERS, Flatten, JobSpec, Reshape
from core.model_forms import UploadedModelRef, ZooModel
from core.model_size import SizeEstimate
from core.models import Dataset, UploadedModel, User
from core.storage import MODEL_SYMBOL_FILE, model_prefix

# Data sets whose records are images, which ``transforms`` apply to.
IMAGE_FORMATS = ("recordio", "archive")


def record_shape(dataset: Dataset, source: Any, field: str) -> tuple[int, ...] | None:
    """One record of an uploaded data set as the network sees it (None when validation did
    not record it): an image set's (H, W, C) images become (C, H', W') after the source's
    transforms; a table's rows are as stored."""
    if not dataset.feature_shape:
        return None
    shape = tuple(int(d) for d in dataset.feature_shape)
    if dataset.format not in IMAGE_FORMATS:
        return shape
    height, width, channels = shape
    transforms = getattr(source, "transforms", None)
    sizes = (dataset.stats or {}).get("image_sizes") or {f"{height}x{width}": 1}
    try:
        shapes = {transform_spec.image_shape(*_height_width(size), channels, transforms)
                  for size in sizes}
    except ValueError as exc:
        raise field_error(f"{field}.transforms", str(exc)) from None
    if len(shapes) > 1:
        raise field_error(f"{field}.transforms", f"the images have several sizes "
                          f"({', '.join(sorted(sizes)[:4])}) and would reach the network at "
                          "several; add a Resize or CenterCrop to one size")
    return shapes.pop()


def _height_width(size: str) -> tuple[int, int]:
    """``"32x48"`` (validation's image size: height x width) -> (32, 48)."""
    height, width = size.split("x")
    return int(height), int(width)


def _reshape_hint(features: int) -> str:
    side = math.isqrt(features)
    shape = f"[-1, 1, {side}, {side}]" if side * side == features else "[-1, C, H, W]"
    return f"add {{type: Reshape, shape: {shape}}} before it"


def _plain_hints(spec: JobSpec, shape: tuple[int, ...]) -> None:
    """The common mistakes, answered with what to do (before asking the inspector)."""
    model = spec.model
    if isinstance(model, ZooModel) and len(shape) != 3:
        raise field_error("model.zoo", f"{model.zoo} takes images (N, 3, H, W) but the "
                          f"training data's rows are {shape}; upload an image data set")
    if isinstance(model, list) and len(shape) == 1:
        for index, layer in enumerate(model):
            if isinstance(layer, Reshape | Flatten):
                break
            if isinstance(layer, IMAGE_LAYERS):
                raise field_error(f"model.{index}", f"{layer.type} expects images (N, C, H, W) "
                                  f"but the training data's rows are flat ({shape[0]} "
                                  f"features); {_reshape_hint(shape[0])}")


def _uploaded_row(session: Session, spec: JobSpec, owner: User) -> UploadedModel | None:
    model = spec.model
    if not isinstance(model, UploadedModelRef):
        return None
    row = repositories.get_model(session, model_id=model.model, owner_id=owner.id)
    if row is None:
        raise field_error("model.model", f"model {model.model} not found")
    if model.params and row.params_sha256 is None:
        raise field_error("model.params",
                          f"model {model.model} was uploaded without a params file")
    return row


def _starts_from_params(spec: JobSpec, row: UploadedModel) -> bool:
    """Whether the worker loads the upload's params (workers.networks.load_initial_weights):
    unless the spec says ``params: false``, whenever the upload has them."""
    return isinstance(spec.model, UploadedModelRef) and spec.model.params is not False \
        and row.params_sha256 is not None


def check_model_fits_data(
    session: Session, *, state: ServiceState, spec: JobSpec, owner: User,
    shape: tuple[int, ...] | None, val_shape: tuple[int, ...] | None = None,
) -> SizeEstimate:
    """Refuse a model that does not build for the data; its size for one batch: the exact
    parameter count and values computed, or core.model_size's estimate when the record
    shape is unknown."""
    row = _uploaded_row(session, spec, owner)
    if shape is None:
        return model_size.estimate(spec, parameters=row.parameter_count if row else 0)
    _plain_hints(spec, shape)
    fit = _ask(state, spec, row, shape, "model")
    if val_shape is not None and val_shape != shape:
        _ask(state, spec, row, val_shape, "data.val")
    return SizeEstimate(parameters=fit.parameter_count, activations=fit.computed_elements)


def _ask(state: ServiceState, spec: JobSpec, row: UploadedModel | None,
         shape: tuple[int, ...], field: str) -> ModelFit:
    inspector = state.inspector
    batch = [spec.data.batch_size, *shape]
    model_json = spec.model.model_dump_json() if not isinstance(spec.model, list) else \
        "[" + ",".join(layer.model_dump_json() for layer in spec.model) + "]"
    # an upload is named by its symbol's sha256: read from storage only when not known
    upload = f"{row.symbol_sha256}|{_starts_from_params(spec, row)}" if row else ""
    key = hashlib.sha256(f"{model_json}|{upload}|{batch}|"
                         f"{inspector.bounds.model_dump_json()}".encode()).hexdigest()
    try:
        answer = inspector.cached(key)
        if answer is None:
            graph = None if row is None else UploadedGraph(
                symbol=state.store.get(model_prefix(row.id) + MODEL_SYMBOL_FILE).decode(),
                input_name=row.input_name, input_shape=list(row.input_shape),
                params=_starts_from_params(spec, row))
            answer = inspector.check(CheckModel(model=spec.model, uploaded=graph,
                                                input_shape=batch, bounds=inspector.bounds),
                                     key=key)
    except InspectionFailed as exc:
        raise field_error("model", f"the model could not be checked: {exc.reason}") from None
    except InspectorUnavailable as exc:
        raise unavailable_error(exc) from None
    if answer.refused is not None and answer.refused.too_large:
        # a size bound: the model is too large for a job (the memory check's field)
        limit = state.settings.limits.max_job_memory_bytes
        raise field_error("model", f"the model is too large for a job: "
                          f"{answer.refused.message} (the limit per job is "
                          f"{model_size.human_bytes(limit)})")
    if answer.refused is not None:
        message = answer.refused.message
        if row is not None:
            message = (f"model {row.id} (uploaded for input {tuple(row.input_shape)}) "
                       f"{message.removeprefix('the model ')}")
        if field == "data.val":
            raise field_error(field, f"the validation data's rows are {tuple(shape)}; "
                              f"{message}")
        raise field_error(answer.refused.field, message)
    assert answer.fit is not None
    return answer.fit
