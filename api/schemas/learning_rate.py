from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat

from api.schemas.base import PublicModel


class LearningRateUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Strict: JSON true is not 1.0, and "0.1" is a string (issue 14).
    learning_rate: StrictFloat = Field(gt=0, allow_inf_nan=False)
    mode: Literal["scale", "override"] = "scale"


class LearningRatePreview(BaseModel):
    """What the change will do to the rest of the schedule, reckoned at ``at_step`` (the
    job's last reported step; the worker applies it at its next step boundary).

    ``scale`` multiplies everything still to come by ``factor`` = requested / current, in
    warmup too (the peak the warmup ramps to is multiplied as well); ``override`` is a
    constant. ``final_step`` is null for a schedule that never ends (a factor decay).
    """

    at_step: int
    mode: str
    current_lr: float
    factor: float | None
    in_warmup: bool
    warmup_steps: int
    peak_lr: float
    peak_step: int
    final_lr: float
    final_step: int | None


class LearningRateChangeAccepted(BaseModel):
    change_id: str
    status: Literal["pending"] = "pending"
    preview: LearningRatePreview | None = None
    warning: str | None = Field(
        default=None, description="why the worker will likely reject the change, if it will"
    )


class LearningRateChangePublic(PublicModel):
    change_id: str = Field(validation_alias="id")
    requested_lr: float
    mode: str
    status: str
    requested_by: str
    requested_at: datetime
    applied_step: int | None
    applied_at: datetime | None
    applied_lr: float | None
    reason: str | None


class LearningRatePublic(BaseModel):
    job_id: str
    learning_rate: float | None
    initial_learning_rate: float | None
    schedule: dict[str, Any] | None
    changes: list[LearningRateChangePublic]
