"""Fork, rollback and lineage over HTTP."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ForkRequest(BaseModel):
    """Fork from the checkpoint at ``step`` (any the job still keeps), or from its latest
    (``checkpoint: latest``, the default), with ``overrides``: spec fields to change
    (optimizer hyperparameters and learning rate, lr_scheduler, rules, epochs, name,
    data.batch_size / shuffle / transforms, metrics, checkpoint, loss, device)."""

    model_config = ConfigDict(extra="forbid")
    step: int | None = Field(default=None, ge=0, le=2**62)
    checkpoint: Literal["latest"] | None = None
    overrides: dict[str, Any] = Field(default_factory=dict)


class RollbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    step: int = Field(ge=0, le=2**62, description="a kept checkpoint's step")
    checkpoint_before: bool = False


class ParentPublic(BaseModel):
    id: str
    fork_step: int | None
    exists: bool = Field(description="false once the parent was deleted")
    name: str | None
    status: str | None


class ChildPublic(BaseModel):
    id: str
    name: str
    status: str
    fork_step: int | None


class RollbackPublic(BaseModel):
    command_id: str
    branch: int | None = Field(description="the abandoned branch's number (its metric "
                               "points: GET .../metrics/abandoned?branch=n)")
    to_step: int | None
    at: datetime | None
    abandoned_points: int | None


class LineagePublic(BaseModel):
    """Where the job came from and what came of it: its parent and the step it was
    forked at, its children, and its rollbacks (each abandoned a branch of its history)."""

    job_id: str
    parent: ParentPublic | None
    children: list[ChildPublic]
    branch: int = Field(description="rollbacks so far (the live history is branch 0)")
    rollbacks: list[RollbackPublic]
