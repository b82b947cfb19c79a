from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from core.models import Dataset


class DatasetPublic(BaseModel):
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

    @classmethod
    def from_row(cls, row: Dataset) -> DatasetPublic:
        return cls(
            id=row.id,
            name=row.name,
            format=row.format,
            size=row.size,
            sha256=row.sha256,
            num_rows=row.num_rows,
            feature_shape=list(row.feature_shape),
            dtype=row.dtype,
            num_classes=row.num_classes,
            created_at=row.created_at,
        )


class DatasetsPublic(BaseModel):
    data: list[DatasetPublic]
