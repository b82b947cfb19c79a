from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel


class MetricPointPublic(BaseModel):
    step: int
    epoch: int
    name: str
    value: float
    time: datetime


class MetricsPublic(BaseModel):
    job_id: str
    points: list[MetricPointPublic]
    # Pass as ``after_step`` to get the next page; None when this page was the last.
    next_after_step: int | None
