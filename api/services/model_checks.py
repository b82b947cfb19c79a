"""At submit: does the spec's model fit its training data? (issue 12)

Caught here, a mismatch is a 422 naming the field; in the worker it was a failed job
("Conv2D expects NCHW input, got shape (1, 64)") minutes later.
"""

from __future__ import annotations

import math

from sqlalchemy.orm import Session

from api.errors import field_error
from core import repositories
from core.jobspec import IMAGE_LAYERS, Flatten, JobSpec, Reshape
from core.model_forms import UploadedModelRef, ZooModel
from core.models import User


def _reshape_hint(features: int) -> str:
    side = math.isqrt(features)
    shape = f"[-1, 1, {side}, {side}]" if side * side == features else "[-1, C, H, W]"
    return f"add {{type: Reshape, shape: {shape}}} before it"


def check_model_fits_data(
    session: Session, *, spec: JobSpec, owner: User, feature_shape: tuple[int, ...] | None
) -> int:
    """Refuse a model that cannot take the data; returns the parameter count known without
    the engine (an upload's, measured at upload; 0 otherwise)."""
    model = spec.model
    if isinstance(model, UploadedModelRef):
        row = repositories.get_model(session, model_id=model.model, owner_id=owner.id)
        if row is None:
            raise field_error("model.model", f"model {model.model} not found")
        if model.params and row.params_sha256 is None:
            raise field_error("model.params", f"model {model.model} was uploaded without a "
                              "params file")
        wanted = tuple(row.input_shape[1:])
        if feature_shape is not None and feature_shape != wanted:
            raise field_error("model.model", f"the model takes input {tuple(row.input_shape)} "
                              f"(batch first) but the training data's rows are {feature_shape}")
        return int(row.parameter_count)
    if isinstance(model, ZooModel):
        if feature_shape is not None and len(feature_shape) != 3:
            raise field_error("model.zoo", f"{model.zoo} takes images (N, 3, H, W) but the "
                              f"training data's rows are {feature_shape}; upload an image "
                              "data set")
        return 0
    if feature_shape is not None and len(feature_shape) == 1:
        for index, layer in enumerate(model):
            if isinstance(layer, Reshape | Flatten):
                break
            if isinstance(layer, IMAGE_LAYERS):
                raise field_error(f"model.{index}", f"{layer.type} expects images (N, C, H, W) "
                                  f"but the training data's rows are flat ({feature_shape[0]} "
                                  f"features); {_reshape_hint(feature_shape[0])}")
    return 0
