"""The base of every response model: built from ORM rows with ``model_validate(row)``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class PublicModel(BaseModel):
    """A response body. ``from_attributes`` reads ORM rows directly; a field whose name
    differs from the column says so with ``validation_alias``."""

    model_config = ConfigDict(from_attributes=True, populate_by_name=True)
