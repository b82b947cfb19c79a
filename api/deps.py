"""FastAPI dependencies as ``Annotated`` aliases: SessionDep, CurrentUser, ...

Dependencies that do no I/O are ``async`` so FastAPI does not hop to a worker thread for
them; the ones that touch the database stay sync and run in the threadpool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session

from api.errors import ApiError, not_found
from api.state import ServiceState
from core import repositories, tokens
from core.channel import AsyncChannel, Channel
from core.config import Settings
from core.models import Job, User, is_id
from core.storage import ObjectStore

ANONYMOUS_USER = "anonymous"


async def get_state(request: Request) -> ServiceState:
    state: ServiceState = request.app.state.service
    return state


StateDep = Annotated[ServiceState, Depends(get_state)]


async def get_settings_dep(state: StateDep) -> Settings:
    return state.settings


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]


async def get_session(state: StateDep) -> AsyncIterator[Session]:
    """A session per request. Routes commit explicitly at the edge (before enqueueing);
    anything left uncommitted is rolled back here.

    Creating a session does no I/O (it connects on first use), so this runs on the event
    loop; only a teardown that still holds a connection goes to a worker thread.
    """
    session = state.sessions()
    try:
        yield session
    finally:
        if session.in_transaction():
            await run_in_threadpool(_discard, session)
        else:
            session.close()


def _discard(session: Session) -> None:
    session.rollback()
    session.close()


SessionDep = Annotated[Session, Depends(get_session)]


async def get_store(state: StateDep) -> ObjectStore:
    return state.store


StoreDep = Annotated[ObjectStore, Depends(get_store)]


async def get_channel(state: StateDep) -> Channel:
    if state.channel is None:
        raise ApiError(503, "unavailable", "the live channel (Redis) is not configured")
    return state.channel


ChannelDep = Annotated[Channel, Depends(get_channel)]


async def get_async_channel(state: StateDep) -> AsyncChannel:
    if state.async_channel is None:
        raise ApiError(503, "unavailable", "the live channel (Redis) is not configured")
    return state.async_channel


AsyncChannelDep = Annotated[AsyncChannel, Depends(get_async_channel)]


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, "unauthorized", message, headers={"WWW-Authenticate": "Bearer"})


def _anonymous_user(state: ServiceState) -> User:
    with state.sessions() as session:
        user = repositories.get_user_by_name(session, name=ANONYMOUS_USER)
        if user is None:
            user = repositories.create_user(session, name=ANONYMOUS_USER)
            session.commit()
        return user


def _lookup_token(state: ServiceState, token_hash: str) -> tuple[User, datetime | None] | None:
    with state.sessions() as session:
        found = tokens.authenticate_hash(session, token_hash=token_hash)
        return (found[0], found[1].expires_at) if found is not None else None


async def get_current_user(request: Request, state: StateDep) -> User:
    """The token's owner. Verified tokens are cached briefly (see TokenCache), so the
    common case touches neither the database nor a worker thread."""
    settings = state.settings
    if not settings.auth_enabled:
        return await run_in_threadpool(_anonymous_user, state)
    token = bearer_token(request)
    if token is None:
        raise _unauthorized("missing bearer token: send 'Authorization: Bearer <token>'")
    secret = settings.secret_key.get_secret_value()
    token_hash = tokens.hash_token(token, secret=secret)
    request.state.token_hash = token_hash  # GET /v1/tokens marks the one in use
    user = await user_of_token_hash(state, token_hash)
    if user is None:
        raise _unauthorized("invalid, revoked or expired token")
    return user


async def user_of_token_hash(state: ServiceState, token_hash: str) -> User | None:
    """The owner of a valid token, from the cache or else the database (then cached);
    None for an unknown, revoked or expired one."""
    cached = state.token_cache.get(token_hash)
    if cached is not None:
        return cached
    found = await run_in_threadpool(_lookup_token, state, token_hash)
    if found is None:
        return None
    user, expires_at = found
    state.token_cache.put(token_hash, user, expires_at=expires_at)
    return user


CurrentUser = Annotated[User, Depends(get_current_user)]


def owned_job(job_id: str, session: SessionDep, user: CurrentUser) -> Job:
    """The caller's job, or a 404 (someone else's job looks exactly like a missing one).

    An id that is not a uuid is not looked up at all: it cannot name a job, and some
    (a NUL byte) would make PostgreSQL refuse the query.
    """
    if not is_id(job_id):
        raise not_found("job", job_id)
    job = repositories.get_job(session, job_id=job_id, owner_id=user.id)
    if job is None:
        raise not_found("job", job_id)
    return job


JobDep = Annotated[Job, Depends(owned_job)]
