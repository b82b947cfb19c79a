from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat

from core.models import LRChange


class LearningRateUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Strict: JSON true is not 1.0, and "0.1" is a string (issue 14).
    learning_rate: StrictFloat = Field(gt=0, allow_inf_nan=False)
    mode: Literal["scale", "override"] = "scale"


class LearningRateChangeAccepted(BaseModel):
    change_id: str
    status: Literal["pending"] = "pending"


class LearningRateChangePublic(BaseModel):
    change_id: str
    requested_lr: float
    mode: str
    status: str
    requested_by: str
    requested_at: datetime
    applied_step: int | None
    applied_at: datetime | None
    applied_lr: float | None
    reason: str | None

    @classmethod
    def from_row(cls, change: LRChange) -> LearningRateChangePublic:
        return cls(
            change_id=change.id,
            requested_lr=change.requested_lr,
            mode=change.mode,
            status=change.status,
            requested_by=change.requested_by,
            requested_at=change.requested_at,
            applied_step=change.applied_step,
            applied_at=change.applied_at,
            applied_lr=change.applied_lr,
            reason=change.reason,
        )


class LearningRatePublic(BaseModel):
    job_id: str
    learning_rate: float | None
    initial_learning_rate: float | None
    schedule: dict[str, Any] | None
    changes: list[LearningRateChangePublic]
