from __future__ import annotations

from pydantic import BaseModel


class StreamTicketPublic(BaseModel):
    """A single-use ticket for ``GET /v1/jobs/{id}/events?ticket=...`` (EventSource
    cannot send an Authorization header, and long-lived tokens never go in URLs)."""

    ticket: str
    expires_in: int
    url: str
