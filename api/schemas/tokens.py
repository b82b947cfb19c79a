from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from api.schemas.base import PublicModel

TokenStatus = Literal["active", "expired", "revoked"]


class TokenPublic(PublicModel):
    """One of the caller's tokens; the token itself is shown only when it is created."""

    id: str
    prefix: str = Field(description="the token's first characters, to tell tokens apart")
    label: str
    created_at: datetime
    expires_at: datetime | None = Field(description="null: never expires")
    revoked_at: datetime | None
    status: TokenStatus
    current: bool = Field(description="whether this request was made with this token")


class TokensPublic(BaseModel):
    data: list[TokenPublic]
