from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from api.schemas.checkpoints import CheckpointFilePublic


class ExportPublic(BaseModel):
    """A succeeded job's network as MXNet files (``format``: ``mxnet``)."""

    job_id: str
    format: Literal["mxnet"]
    files: list[CheckpointFilePublic]
