from __future__ import annotations

from pydantic import BaseModel, Field


class UsageBytes(BaseModel):
    datasets: int = Field(description="stored data sets (validating, ready or invalid)")
    uploads_in_progress: int = Field(
        description="the declared size of chunked uploads not yet completed (reserved "
                    "when they start)")
    models: int = Field(description="uploaded models: symbol JSON + params")
    checkpoints: int = Field(description="checkpoints your jobs keep (not counted)")
    exports: int = Field(description="exported networks of your jobs (not counted)")


class UsagePublic(BaseModel):
    quota_bytes: int = Field(description="what you may upload in all")
    used_bytes: int = Field(description="what counts against the quota: the kinds in "
                                        "`counted`")
    available_bytes: int
    counted: list[str] = Field(description="the kinds of `bytes` the quota counts")
    bytes: UsageBytes
