from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from api.schemas.base import PublicModel


class MetricPointPublic(BaseModel):
    step: int
    epoch: int
    name: str
    value: float
    time: datetime


class MetricsPublic(BaseModel):
    job_id: str
    points: list[MetricPointPublic]
    # Pass as ``cursor`` to get the next page; None when this page was the last.
    next_cursor: str | None
    # Older paging: pass as ``after_step``. None on the last page, and also when a single
    # step has more points than ``limit`` and this page ended inside it (only
    # ``next_cursor`` can continue there).
    next_after_step: int | None


class AbandonedPointPublic(PublicModel):
    branch: int = Field(description="which rollback set it aside (1: the first)")
    step: int
    epoch: int
    name: str
    value: float
    time: datetime


class AbandonedPointsPublic(BaseModel):
    job_id: str
    points: list[AbandonedPointPublic]
    next_cursor: str | None
