from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel


class CheckpointFilePublic(BaseModel):
    name: str
    sha256: str | None
    size: int | None
    url: str


class CheckpointPublic(BaseModel):
    step: int
    epoch: int
    sha256: str | None
    size: int
    created_at: datetime
    files: list[CheckpointFilePublic]


class CheckpointsPublic(BaseModel):
    job_id: str
    data: list[CheckpointPublic]
