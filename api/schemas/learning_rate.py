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


class LearningRateChangeAccepted(BaseModel):
    change_id: str
    status: Literal["pending"] = "pending"


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
