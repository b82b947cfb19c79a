"""Listing and revoking one's own API tokens (creating them is ``rudder token create``)."""

from __future__ import annotations

import logging

import redis
from sqlalchemy.orm import Session

from api.errors import not_found
from api.schemas.tokens import TokenPublic, TokensPublic, TokenStatus
from api.state import ServiceState
from core import repositories, tokens
from core.models import ApiToken, User, is_id, utcnow

log = logging.getLogger("rudder.api")


def _public(row: ApiToken, *, current_hash: str | None) -> TokenPublic:
    status: TokenStatus = ("revoked" if row.revoked_at is not None
                           else "expired" if tokens.is_expired(row) else "active")
    return TokenPublic(
        id=row.id, prefix=row.prefix, label=row.label, created_at=row.created_at,
        expires_at=row.expires_at, revoked_at=row.revoked_at, status=status,
        current=row.token_hash == current_hash,
    )


def list_tokens(session: Session, *, owner: User, current_hash: str | None) -> TokensPublic:
    rows = repositories.list_api_tokens(session, user_id=owner.id)
    return TokensPublic(data=[_public(r, current_hash=current_hash) for r in rows])


def revoke(session: Session, *, state: ServiceState, owner: User, token_id: str) -> None:
    """Revoke the owner's token (again is fine); it stops working on every api process
    at once, or within the token cache's ttl on those Redis cannot reach, and so do the
    event streams it opened and the stream tickets it asked for."""
    row = repositories.get_owned_api_token(session, token_id=token_id, user_id=owner.id) if (
        is_id(token_id)) else None
    if row is None:
        raise not_found("token", token_id)
    if row.revoked_at is None:
        repositories.mark_api_token_revoked(session, token_id=row.id)
        session.commit()
        log.info("token %s (%s...) of %s revoked at %s", row.id, row.prefix, owner.name,
                 utcnow().isoformat())
    state.token_cache.evict(row.token_hash)
    state.streams.end_threadsafe(row.token_hash)  # this process's streams: at once
    if state.channel is None:
        return
    try:
        state.channel.announce_token_revoked(row.token_hash)
    except redis.RedisError as exc:
        # The database says revoked; other processes stop trusting their cached copy
        # when its ttl runs out.
        log.warning("token %s revoked, but Redis could not announce it (%s); other api "
                    "processes accept it for up to %g s more", row.id, exc,
                    state.token_cache.ttl)
