"""API tokens: creation (shown once), keyed hashing, lookup.

Only ``HMAC-SHA256(secret_key, token)`` is stored, so a leaked database does not leak
usable tokens. ``issue_token`` is what ``rudder token create`` and ``rudder up`` call.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from sqlalchemy.orm import Session, sessionmaker

from core import repositories
from core.config import get_settings
from core.db import session_scope
from core.models import ApiToken, User

TOKEN_PREFIX = "rdr_"


def hash_token(token: str, *, secret: str | None = None) -> str:
    key = secret if secret is not None else get_settings().secret_key.get_secret_value()
    return hmac.new(key.encode(), token.encode(), hashlib.sha256).hexdigest()


def generate_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def create_token(
    session: Session, *, user: User, label: str = "", secret: str | None = None
) -> tuple[ApiToken, str]:
    """Store a new token for ``user``; returns the row and the plain token (shown once)."""
    plain = generate_token()
    row = repositories.add_api_token(
        session, user_id=user.id, token_hash=hash_token(plain, secret=secret),
        prefix=plain[:10], label=label,
    )
    return row, plain


def create_user_and_token(
    session: Session, *, name: str, label: str = "", secret: str | None = None
) -> tuple[User, str]:
    """Get or create the user called ``name`` and give them a fresh token."""
    user = repositories.get_user_by_name(session, name=name)
    if user is None:
        user = repositories.create_user(session, name=name)
    _, plain = create_token(session, user=user, label=label, secret=secret)
    return user, plain


def authenticate(session: Session, *, token: str, secret: str | None = None) -> User | None:
    """The user owning ``token``, or None for unknown or revoked tokens."""
    if not token:
        return None
    row = repositories.get_api_token(session, token_hash=hash_token(token, secret=secret))
    if row is None or row.revoked_at is not None:
        return None
    return repositories.get_user(session, user_id=row.user_id)


def revoke_token(session: Session, *, token: str, secret: str | None = None) -> bool:
    row = repositories.get_api_token(session, token_hash=hash_token(token, secret=secret))
    if row is None:
        return False
    return repositories.mark_api_token_revoked(session, token_id=row.id)


def issue_token(
    name: str,
    *,
    label: str = "",
    factory: sessionmaker[Session] | None = None,
    secret: str | None = None,
) -> tuple[str, str]:
    """Create (or reuse) user ``name`` and commit a new token: returns (user_id, token).

    Uses the configured database (``RUDDER_DATABASE_URL``) and secret unless ``factory``
    / ``secret`` are given; the api must run with the same ``RUDDER_SECRET_KEY``.
    """
    with session_scope(factory) as session:
        user, plain = create_user_and_token(session, name=name, label=label, secret=secret)
        return user.id, plain
