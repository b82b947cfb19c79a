from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from api.schemas.base import PublicModel


class DatasetPublic(PublicModel):
    id: str
    name: str
    format: str
    size: int
    sha256: str
    num_rows: int
    feature_shape: list[int]
    dtype: str
    num_classes: int | None
    created_at: datetime


class DatasetsPublic(BaseModel):
    data: list[DatasetPublic]
