from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, computed_field

from api.schemas.base import PublicModel
from core.jobspec import PRINTABLE


class DatasetFilePublic(BaseModel):
    path: str
    size: int


class DatasetPublic(PublicModel):
    id: str
    name: str
    format: str
    status: Literal["validating", "ready", "invalid"]
    reason: str | None = Field(default=None, description="why an invalid data set was refused")
    size: int
    sha256: str
    num_rows: int
    feature_shape: list[int]
    dtype: str
    num_classes: int | None
    stats: dict[str, Any] | None = Field(
        default=None,
        description="computed at validation: records, classes, image sizes, per-channel "
                    "mean/std",
    )
    files: list[DatasetFilePublic] | None = None
    created_at: datetime
    validation_started_at: datetime | None = Field(
        default=None, description="when a validator took it up (null while queued)")

    @computed_field(  # type: ignore[prop-decorator]
        description="while validating: `queued` (waiting for a validator) or `running` "
                    "(a validator is checking it); null once ready or invalid")
    @property
    def validation(self) -> Literal["queued", "running"] | None:
        if self.status != "validating":
            return None
        return "running" if self.validation_started_at is not None else "queued"


class DatasetsPublic(BaseModel):
    data: list[DatasetPublic]


# A plain file name: no directories, no leading dot, nothing a shell or a key would mind.
FileName = Annotated[
    str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")
]


class UploadFileIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: FileName = Field(description="the file's name: .npz, .csv, .rec + .idx, .zip, .tar")
    size: int = Field(ge=1, le=2**50, description="bytes")


class UploadCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=PRINTABLE)]
    files: list[UploadFileIn] = Field(min_length=1, max_length=2)
    part_size: int | None = Field(
        default=None, ge=1, le=2**40,
        description="bytes per part (the server's default when omitted)",
    )


class UploadFilePublic(BaseModel):
    path: str
    size: int
    first_part: int = Field(description="the global number of this file's first part")
    parts: int


class UploadPartPublic(PublicModel):
    number: int
    size: int
    sha256: str


class UploadPublic(PublicModel):
    id: str
    name: str
    status: Literal["open", "completing", "completed"]
    part_size: int
    total_size: int
    total_parts: int
    files: list[UploadFilePublic]
    received: list[UploadPartPublic] = Field(description="parts stored so far, by number")
    missing: list[int] = Field(description="part numbers still to send")
    dataset_id: str = Field(description="the data set this upload becomes on completion")
    created_at: datetime
