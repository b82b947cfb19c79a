"""The System view: live workers (from their heartbeats) and queue lengths."""

from __future__ import annotations

from pydantic import BaseModel, Field

from core.events import GpuUsage


class WorkerPublic(BaseModel):
    worker_id: str
    hostname: str
    queues: list[str]
    busy: bool = Field(description="training a job now")
    current_job_id: str | None = Field(description="the job, when it is one of yours")
    rank: int | None = Field(default=None, description="its rank in that job, when the job "
                             "trains on several workers (one of yours)")
    ranks: int | None = Field(default=None, description="how many workers train that job")
    cpu_percent: float | None = Field(description="the machine's CPU use, percent")
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    gpus: list[GpuUsage]
    seconds_since_seen: float


class QueuePublic(BaseModel):
    name: str
    waiting: int = Field(description="training tasks not yet picked up by a worker")


class WorkersPublic(BaseModel):
    workers: list[WorkerPublic]
    queues: list[QueuePublic]


class WorkerSamplePublic(BaseModel):
    time: float = Field(description="unix seconds of the heartbeat")
    cpu_percent: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    busy: bool
    steps_per_second: float | None = Field(
        description="the steps its job advanced since the worker's previous heartbeat, per "
        "second (from the job's reported metric steps); null while idle")


class WorkerHistoryPublic(BaseModel):
    worker_id: str
    hostname: str
    samples: list[WorkerSamplePublic]


class WorkersHistoryPublic(BaseModel):
    """Each worker's heartbeats over the window, oldest first (the api keeps an hour)."""

    since: float = Field(description="unix seconds: the window's start")
    workers: list[WorkerHistoryPublic]
