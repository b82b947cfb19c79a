from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from api.schemas.checkpoints import CheckpointFilePublic


class ExportPublic(BaseModel):
    """A job's network at a kept checkpoint as MXNet files (``format``: ``mxnet``)."""

    job_id: str
    format: Literal["mxnet"]
    step: int | None = Field(description="the checkpoint's step (null: not known, an export "
                             "written before its checkpoint was recorded)")
    files: list[CheckpointFilePublic]
