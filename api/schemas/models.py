from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from api.schemas.base import PublicModel


class ModelPublic(PublicModel):
    """An uploaded MXNet symbol, as its inspection at upload found it."""

    id: str
    name: str
    input_name: str
    input_shape: list[int]
    output_shapes: list[list[int]]
    ops: dict[str, int]
    parameter_count: int
    symbol_sha256: str
    symbol_size: int
    params_sha256: str | None
    params_size: int | None
    created_at: datetime


class ModelsPublic(BaseModel):
    data: list[ModelPublic]
