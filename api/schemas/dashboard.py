"""What the dashboard's charts read: downsampled metric series and the job's timeline."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field


class MetricSeriesPublic(BaseModel):
    name: str
    steps: list[int]
    values: list[float]
    total_points: int = Field(description="points stored for this metric")
    downsampled: bool = Field(description="true when only some stored points are returned")


class EpochBoundary(BaseModel):
    epoch: int
    first_step: int


class MetricSeriesSetPublic(BaseModel):
    """Each metric's history in at most ``max_points`` points, min/max preserving:
    every bucket of consecutive points keeps its first, smallest, largest and last."""

    job_id: str
    series: list[MetricSeriesPublic]
    epochs: list[EpochBoundary] = Field(description="the first step of every epoch seen")


class TimelineEntryPublic(BaseModel):
    """One runtime change on the step axis: an lr change applied, a status change
    (pause, resume, a worker restarting from a checkpoint, the end), a checkpoint."""

    kind: Literal["lr", "status", "checkpoint"]
    step: int | None = Field(description="where it took effect; null if not known")
    time: datetime
    title: str
    detail: str


class TimelinePublic(BaseModel):
    job_id: str
    entries: list[TimelineEntryPublic]
