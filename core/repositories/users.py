"""Users and their API tokens.

Queries flush and never commit (see core/repositories/__init__.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    or_,
    select,
)
from sqlalchemy.orm import Session

from core.models import (
    ApiToken,
    User,
    utcnow,
)


def create_user(session: Session, *, name: str) -> User:
    user = User(name=name)
    session.add(user)
    session.flush()
    return user


def get_user(session: Session, *, user_id: str) -> User | None:
    return session.get(User, user_id)


def get_user_by_name(session: Session, *, name: str) -> User | None:
    return session.scalars(select(User).where(User.name == name)).one_or_none()


def add_api_token(
    session: Session, *, user_id: str, token_hash: str, prefix: str, label: str,
    expires_at: datetime | None = None,
) -> ApiToken:
    row = ApiToken(user_id=user_id, token_hash=token_hash, prefix=prefix, label=label,
                   expires_at=expires_at)
    session.add(row)
    session.flush()
    return row


def get_api_token(session: Session, *, token_hash: str) -> ApiToken | None:
    query = select(ApiToken).where(ApiToken.token_hash == token_hash)
    return session.scalars(query).one_or_none()


def list_api_tokens(session: Session, *, user_id: str) -> list[ApiToken]:
    """The user's tokens, newest first (revoked and expired ones too: a history)."""
    query = (select(ApiToken).where(ApiToken.user_id == user_id)
             .order_by(ApiToken.created_at.desc(), ApiToken.id))
    return list(session.scalars(query))


def get_owned_api_token(session: Session, *, token_id: str, user_id: str) -> ApiToken | None:
    query = select(ApiToken).where(ApiToken.id == token_id, ApiToken.user_id == user_id)
    return session.scalars(query).one_or_none()


def mark_api_token_revoked(session: Session, *, token_id: str) -> bool:
    """Revoke a token once; False when it was already revoked (or does not exist)."""
    row = session.get(ApiToken, token_id)
    if row is None or row.revoked_at is not None:
        return False
    row.revoked_at = utcnow()
    session.flush()
    return True


def valid_token_hashes(session: Session, *, token_hashes: list[str]) -> set[str]:
    """Which of ``token_hashes`` still authenticate (not revoked, not expired)."""
    rows = session.scalars(
        select(ApiToken.token_hash).where(
            ApiToken.token_hash.in_(token_hashes), ApiToken.revoked_at.is_(None),
            or_(ApiToken.expires_at.is_(None), ApiToken.expires_at > utcnow()),
        )
    )
    return set(rows)
