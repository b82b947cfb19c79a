from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.models import LRChange


class LearningRateUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    learning_rate: float = Field(gt=0, allow_inf_nan=False)
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
