from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from api.schemas.base import PublicModel
from core.jobspec import JobSpec


class JobCreate(JobSpec):
    """The body of ``POST /v1/jobs``: a job spec (v1)."""


class JobProgress(PublicModel):
    epoch: int = Field(description="epochs completed (a finished 12-epoch job shows 12)")
    step: int
    current_lr: float | None
    metrics: dict[str, Any]


class JobPublic(PublicModel):
    id: str
    name: str
    status: str
    status_reason: str | None
    queue: str
    progress: JobProgress
    epochs_total: int | None = Field(default=None, description="the spec's ``epochs``")
    attempts: int
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    spec: dict[str, Any] | None = None
    parent_id: str | None = Field(default=None, description="a fork: the job it came from")
    fork_step: int | None = Field(default=None, description="a fork: the parent's checkpoint "
                                  "step it started from")
    branch: int = Field(default=0, description="rollbacks so far (GET .../lineage)")
    running_seconds: float = Field(default=0.0, description="time spent training, summed "
                                   "over every run (``started_at`` is the last run's start)")
    steps_per_second: float | None = Field(
        default=None, description="the pace over the last minute of reported steps, while "
        "running (single-job reads only); null otherwise")


class JobsPublic(BaseModel):
    data: list[JobPublic]
    next_cursor: str | None


class JobControlPublic(BaseModel):
    """Answer to pause/resume/cancel. ``command_id`` is set when the request was handed
    to the running worker (confirmed later by a ``status`` event naming it)."""

    job_id: str
    action: Literal["pause", "resume", "cancel"]
    status: str
    command_id: str | None = None
    pending: bool
