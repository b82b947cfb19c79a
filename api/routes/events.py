"""Server-Sent Events tailing a job's Redis stream.

Auth is the usual Bearer header (the dashboard uses ``fetch()`` streaming so it can send
it), or a single-use ticket from ``POST /v1/jobs/{id}/events/ticket`` for clients such as
``EventSource`` that cannot set headers. Long-lived tokens never appear in URLs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

import redis.exceptions
from fastapi import APIRouter, Header, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from api import telemetry
from api.deps import (
    AsyncChannelDep,
    ChannelDep,
    CurrentUser,
    JobDep,
    StateDep,
    bearer_token,
    get_current_user,
    user_of_token_hash,
)
from api.errors import ApiError, field_error
from api.schemas.events import StreamTicketPublic
from api.services import jobs as jobs_service
from api.state import ServiceState
from api.streams import OpenStreams
from core.channel import STREAM_START, AsyncChannel, Event
from core.models import TERMINAL_STATUSES

log = logging.getLogger("rudder.api")
router = APIRouter(prefix="/v1/jobs/{job_id}/events", tags=["events"])
STREAM_ID = re.compile(r"^\d{1,20}-\d{1,20}$")
UINT64_MAX = 2**64 - 1  # Redis stream ids are two unsigned 64-bit integers


def _is_stream_id(value: str) -> bool:
    """Checked in full here: an id Redis refuses would end the stream after its 200."""
    return bool(STREAM_ID.match(value)) and all(
        int(part) <= UINT64_MAX for part in value.split("-")
    )
# A comment line every idle block keeps proxies from closing the connection and gives
# us a write that fails fast once the client is gone.
KEEPALIVE = b": keepalive\n\n"


def format_event(event: Event) -> bytes:
    data = json.dumps(event.data, separators=(",", ":"))
    return f"id: {event.id}\nevent: {event.type}\ndata: {data}\n\n".encode()


def _is_terminal(event: Event) -> bool:
    if event.type != "status":
        return False
    value = event.data.get("status")
    return isinstance(value, str) and value in {s.value for s in TERMINAL_STATUSES}


async def _tail(
    request: Request,
    channel: AsyncChannel,
    streams: OpenStreams,
    *,
    job_id: str,
    token_hash: str | None,
    after: str,
    first: list[Event],
    max_seconds: float,
    block_ms: int,
    already_finished: bool,
) -> AsyncIterator[bytes]:
    """``first`` was read before the response started (so a Redis that is down is a 503,
    not a 200 and a dropped stream); the rest is tailed here, until the job ends, the
    lifetime is up, the client leaves, or the token that opened it is revoked."""
    deadline = time.monotonic() + max_seconds
    telemetry.SSE_CONNECTIONS.inc()
    with streams.watch(token_hash) as revoked:
        revocation = asyncio.ensure_future(revoked.wait())
        try:
            async for chunk in _follow(request, channel, revocation, job_id=job_id,
                                       after=after, first=first, deadline=deadline,
                                       block_ms=block_ms, already_finished=already_finished):
                yield chunk
        finally:
            revocation.cancel()
            telemetry.SSE_CONNECTIONS.dec()


async def _follow(
    request: Request,
    channel: AsyncChannel,
    revocation: asyncio.Task[Literal[True]],
    *,
    job_id: str,
    after: str,
    first: list[Event],
    deadline: float,
    block_ms: int,
    already_finished: bool,
) -> AsyncIterator[bytes]:
    # Tell EventSource-style clients how soon to reconnect after we close.
    yield b"retry: 1000\n\n"
    events = first
    while True:
        if not events:
            if already_finished:
                return  # nothing more will ever come
            if events is not first:
                yield KEEPALIVE
        for event in events:
            yield format_event(event)
            if _is_terminal(event):
                return
        if time.monotonic() >= deadline or await request.is_disconnected():
            return
        after = events[-1].id if events else after
        remaining_ms = int((deadline - time.monotonic()) * 1000)
        reading = asyncio.ensure_future(channel.read_events(
            job_id, after=after, block_ms=max(1, min(block_ms, remaining_ms))))
        waiting: set[asyncio.Future[Any]] = {reading, revocation}
        try:
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # the response was closed (the client went away)
            reading.cancel()
            raise
        if revocation.done():
            reading.cancel()  # redis-py drops the connection of a cancelled read
            with contextlib.suppress(asyncio.CancelledError, redis.exceptions.RedisError):
                await reading
            yield b": the token of this stream was revoked\n\n"
            return
        try:
            events = reading.result()
        except redis.exceptions.RedisError as exc:
            # The 200 is out; end the stream cleanly. The client reconnects with its
            # Last-Event-ID and gets a 503 with Retry-After until Redis is back.
            log.warning("event stream of job %s ended: Redis failed (%s)", job_id, exc)
            return


async def _authorize(
    request: Request, state: ServiceState, channel: AsyncChannel, job_id: str, ticket: str | None
) -> tuple[bool, str | None]:
    """Whether the job is already finished, and the hash of the token the stream is
    opened with (its revocation ends the stream); raises 401/404 like other endpoints.

    A ticket names its user and the token that asked for it, which must still be valid
    (a ticket issued before its token's revocation opens nothing); otherwise the caller
    is whoever the normal auth dependency (``get_current_user``: the same token cache,
    the same 401s) says they are.
    """

    def finished_if_owned(user_id: str) -> bool:
        with state.sessions() as session:
            return jobs_service.finished_if_owned(session, job_id=job_id, owner_id=user_id)

    if ticket is not None:
        claims = await channel.redeem_stream_ticket(ticket)
        if claims is None or claims.get("job_id") != job_id or not claims.get("user_id"):
            raise ApiError(401, "unauthorized", "stream ticket is invalid, used or expired")
        token_hash = claims.get("token_hash")
        if state.settings.auth_enabled and (
                token_hash is None or await user_of_token_hash(state, token_hash) is None):
            raise ApiError(401, "unauthorized", "stream ticket's token was revoked or has "
                                                "expired")
        return await run_in_threadpool(finished_if_owned, str(claims["user_id"])), token_hash
    if bearer_token(request) is None and state.settings.auth_enabled:
        raise ApiError(401, "unauthorized", "missing bearer token or stream ticket",
                       headers={"WWW-Authenticate": "Bearer"})
    user = await get_current_user(request, state)
    token_hash = getattr(request.state, "token_hash", None)
    return await run_in_threadpool(finished_if_owned, user.id), token_hash


@router.get("", response_class=StreamingResponse)
async def stream_events(
    job_id: str,
    request: Request,
    state: StateDep,
    channel: AsyncChannelDep,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    after: Annotated[str | None, Query(description="stream id to start after")] = None,
    ticket: Annotated[str | None, Query(max_length=128)] = None,
) -> StreamingResponse:
    """``metric``, ``lr``, ``status``, ``checkpoint`` and ``log`` events; each ``id:`` is
    the Redis stream id, and ``Last-Event-ID`` resumes right after it."""
    start = last_event_id or after or STREAM_START
    if not _is_stream_id(start):
        field = "Last-Event-ID" if last_event_id else "after"
        raise field_error(field, "must be a stream id like 1700000000000-0", status_code=400)
    finished, token_hash = await _authorize(request, state, channel, job_id, ticket)
    # Read once before answering: Redis errors here are a 503 from api/errors.py.
    first = await channel.read_events(job_id, after=start)
    body = _tail(
        request,
        channel,
        state.streams,
        job_id=job_id,
        token_hash=token_hash,
        after=start,
        first=first,
        max_seconds=state.settings.stream.max_connection_seconds,
        block_ms=state.settings.stream.block_ms,
        already_finished=finished,
    )
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(body, media_type="text/event-stream", headers=headers)


@router.post("/ticket", status_code=201)
def create_stream_ticket(
    request: Request, job: JobDep, state: StateDep, channel: ChannelDep, user: CurrentUser
) -> StreamTicketPublic:
    ttl = state.settings.stream.ticket_ttl_seconds
    ticket = channel.create_stream_ticket(job_id=job.id, user_id=user.id, ttl_s=ttl,
                                          token_hash=getattr(request.state, "token_hash", None))
    return StreamTicketPublic(
        ticket=ticket, expires_in=ttl, url=f"/v1/jobs/{job.id}/events?ticket={ticket}"
    )
