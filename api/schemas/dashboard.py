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
    abandoned: bool = Field(default=False, description="a branch a rollback set aside "
                            "(include_abandoned=true); draw it faded")
    branch: int = Field(default=0, description="0: the live history; n: what the n-th "
                        "rollback abandoned")


class EpochBoundary(BaseModel):
    epoch: int
    first_step: int = Field(description="the first step reported in this epoch")
    last_step: int = Field(description="the last step reported in this epoch: the "
                           "epoch-end point (validation) is recorded at the epoch's last step, "
                           "so the next epoch starts right after it")


class StepClock(BaseModel):
    """When steps were reported (unix seconds): the charts' wall-clock and relative-time
    axes. Thinned like the series (evenly, both ends kept)."""

    steps: list[int]
    times: list[float]


class MetricSeriesSetPublic(BaseModel):
    """Each metric's history in at most ``max_points`` points, min/max preserving:
    every bucket of consecutive points keeps its first, smallest, largest and last."""

    job_id: str
    series: list[MetricSeriesPublic]
    epochs: list[EpochBoundary] = Field(description="the first and last step of every epoch "
                                        "seen")
    clock: StepClock = Field(default_factory=lambda: StepClock(steps=[], times=[]))


class TimelineEntryPublic(BaseModel):
    """One runtime change on the step axis (a chart marker): a step-boundary command
    (``lr`` for learning-rate changes, ``command`` for every other kind), a status change
    (pause, resume, a worker restarting from a checkpoint, the end), a checkpoint."""

    kind: Literal["lr", "command", "status", "checkpoint"]
    step: int | None = Field(description="where it took effect; null if not known")
    time: datetime
    title: str
    detail: str
    command_id: str | None = Field(default=None, description="commands: the command's id")
    command_kind: str | None = Field(default=None, description="commands: set_lr, "
                                     "set_hyperparameters, freeze, rollback, ...")
    status: str | None = Field(default=None, description="commands: pending, applied or "
                               "rejected")
    by: str | None = Field(default=None, description="commands: the user's name, "
                           "rule <name> or fork")
    abandoned: bool = Field(default=False, description="commands: applied on a branch a "
                            "rollback discarded")


class TimelinePublic(BaseModel):
    job_id: str
    entries: list[TimelineEntryPublic]
