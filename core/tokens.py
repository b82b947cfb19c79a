"""API tokens: creation (shown once), keyed hashing, lookup, expiry and revocation.

Only ``HMAC-SHA256(secret_key, token)`` is stored, so a leaked database does not leak
usable tokens. ``issue_token`` is what ``rudder token create`` and ``rudder up`` call.
A token may carry an expiry (``expires_in``); revoked and expired tokens authenticate no
one. Listing and revoking one's own tokens is ``GET/DELETE /v1/tokens``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from core import repositories
from core.config import get_settings
from core.db import session_scope
from core.models import ApiToken, User, utcnow

TOKEN_PREFIX = "rdr_"
_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw]?)\s*$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MAX_EXPIRES_IN = timedelta(days=3650)


def parse_duration(text: str) -> timedelta:
    """``90``, ``90s``, ``15m``, ``12h``, ``30d`` or ``2w`` as a positive timedelta.

    >>> parse_duration("30d")
    datetime.timedelta(days=30)
    """
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration like 3600, 15m, 12h, 30d or 2w")
    seconds = int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if not 0 < seconds <= MAX_EXPIRES_IN.total_seconds():
        raise ValueError(f"{text!r} must be more than 0 s and at most {MAX_EXPIRES_IN.days} days")
    return timedelta(seconds=seconds)


def is_expired(row: ApiToken, *, now: datetime | None = None) -> bool:
    return row.expires_at is not None and row.expires_at <= (now or utcnow())


def hash_token(token: str, *, secret: str | None = None) -> str:
    key = secret if secret is not None else get_settings().secret_key.get_secret_value()
    return hmac.new(key.encode(), token.encode(), hashlib.sha256).hexdigest()


def generate_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def create_token(
    session: Session, *, user: User, label: str = "", secret: str | None = None,
    expires_in: timedelta | None = None,
) -> tuple[ApiToken, str]:
    """Store a new token for ``user``; returns the row and the plain token (shown once)."""
    plain = generate_token()
    row = repositories.add_api_token(
        session, user_id=user.id, token_hash=hash_token(plain, secret=secret),
        prefix=plain[:10], label=label,
        expires_at=utcnow() + expires_in if expires_in is not None else None,
    )
    return row, plain


def create_user_and_token(
    session: Session, *, name: str, label: str = "", secret: str | None = None,
    expires_in: timedelta | None = None,
) -> tuple[User, str]:
    """Get or create the user called ``name`` and give them a fresh token."""
    user = repositories.get_user_by_name(session, name=name)
    if user is None:
        user = repositories.create_user(session, name=name)
    _, plain = create_token(session, user=user, label=label, secret=secret,
                            expires_in=expires_in)
    return user, plain


def authenticate_hash(
    session: Session, *, token_hash: str
) -> tuple[User, ApiToken] | None:
    """The owner and row of a valid token; None for unknown, revoked or expired ones."""
    row = repositories.get_api_token(session, token_hash=token_hash)
    if row is None or row.revoked_at is not None or is_expired(row):
        return None
    user = repositories.get_user(session, user_id=row.user_id)
    return (user, row) if user is not None else None


def authenticate(session: Session, *, token: str, secret: str | None = None) -> User | None:
    """The user owning ``token``, or None for unknown, revoked or expired tokens."""
    if not token:
        return None
    found = authenticate_hash(session, token_hash=hash_token(token, secret=secret))
    return found[0] if found is not None else None


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
    expires_in: timedelta | None = None,
) -> tuple[str, str]:
    """Create (or reuse) user ``name`` and commit a new token: returns (user_id, token).

    Uses the configured database (``RUDDER_DATABASE_URL``) and secret unless ``factory``
    / ``secret`` are given; the api must run with the same ``RUDDER_SECRET_KEY``.
    """
    with session_scope(factory) as session:
        user, plain = create_user_and_token(session, name=name, label=label, secret=secret,
                                            expires_in=expires_in)
        return user.id, plain
