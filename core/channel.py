"""The live channel in Redis. This module is the only place that knows Redis key names.

Per job (prefix ``rudder:job:{id}:``):

- ``events``  a Stream of ``{type, data}`` entries (metric, lr, status, checkpoint, log);
  the entry id is the SSE ``id:`` and ``Last-Event-ID`` resumes after it.
- ``control`` a Stream of commands for the running worker (set_lr, pause, cancel), each
  with its own ``command_id``; the worker polls it without blocking and keeps its last id.
- ``lease``   the running worker's owner token with a TTL; renew and release compare the
  owner atomically (Lua), so a worker whose lease expired cannot extend or drop another's.
- ``lr-changes`` a sorted set of the learning-rate changes admitted in the rate-limit
  window (score: admission time in ms on the Redis clock); check-and-admit is one Lua
  step, so concurrent requests on any number of api processes cannot overrun the limit.
"""

from __future__ import annotations

import json
import secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import redis
import redis.asyncio as aioredis

EVENT_TYPES = frozenset({"metric", "lr", "status", "checkpoint", "log"})
CommandType = Literal["set_lr", "pause", "cancel"]
COMMAND_TYPES = frozenset({"set_lr", "pause", "cancel"})
STREAM_START = "0-0"
DEFAULT_EVENTS_MAXLEN = 10_000
CONTROL_MAXLEN = 1_000


def job_prefix(job_id: str) -> str:
    return f"rudder:job:{job_id}:"


def events_key(job_id: str) -> str:
    return job_prefix(job_id) + "events"


def control_key(job_id: str) -> str:
    return job_prefix(job_id) + "control"


def lease_key(job_id: str) -> str:
    return job_prefix(job_id) + "lease"


def lr_changes_key(job_id: str) -> str:
    return job_prefix(job_id) + "lr-changes"


def ticket_key(ticket: str) -> str:
    return f"rudder:stream-ticket:{ticket}"


def job_keys(job_id: str) -> list[str]:
    return [events_key(job_id), control_key(job_id), lease_key(job_id), lr_changes_key(job_id)]


@dataclass(frozen=True)
class Event:
    """One entry of a job's events stream."""

    id: str
    type: str
    data: dict[str, Any]


@dataclass(frozen=True)
class Command:
    """One control command; ``stream_id`` is where the worker resumes reading."""

    command_id: str
    type: str
    data: dict[str, Any] = field(default_factory=dict)
    stream_id: str = ""


def _decode_event(entry_id: str, fields: dict[str, str]) -> Event:
    return Event(id=entry_id, type=fields.get("type", "log"), data=json.loads(fields["data"]))


def _decode_command(entry_id: str, fields: dict[str, str]) -> Command:
    return Command(
        command_id=fields["command_id"],
        type=fields["type"],
        data=json.loads(fields.get("data", "{}")),
        stream_id=entry_id,
    )


def _event_fields(event_type: str, data: dict[str, Any]) -> dict[str, str]:
    if event_type not in EVENT_TYPES:
        expected = ", ".join(sorted(EVENT_TYPES))
        raise ValueError(f"unknown event type {event_type!r}; expected one of {expected}")
    return {"type": event_type, "data": json.dumps(data, allow_nan=False, default=str)}


# Renew/release only when the caller still owns the lease: the compare and the write
# must be one atomic step or a late worker could extend a lease another worker took.
_RENEW_LUA = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE_LUA = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


# Sliding-window admission. Counting and adding must be one atomic step: counted first
# and added later, concurrent requests all see the same count and all pass. The clock is
# Redis's own (TIME), so api processes with skewed clocks share one window.
# Returns {1, 0} when admitted, else {0, ms until the oldest blocking admission leaves}.
_ADMIT_LUA = """
local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
redis.call('zremrangebyscore', KEYS[1], '-inf', now - window)
local count = redis.call('zcard', KEYS[1])
if count < limit then
  redis.call('zadd', KEYS[1], now, ARGV[3])
  redis.call('pexpire', KEYS[1], window)
  return {1, 0}
end
local blocking = redis.call('zrange', KEYS[1], count - limit, count - limit, 'WITHSCORES')
return {0, tonumber(blocking[2]) + window - now}
"""


@dataclass(frozen=True)
class Admission:
    """The answer of a sliding-window rate limit.

    ``token`` names the admission so it can be given back (``release_lr_change``) when
    the admitted work failed; ``retry_after_s`` is 0 when admitted.
    """

    admitted: bool
    retry_after_s: float
    token: str = ""


class Channel:
    """Synchronous access to the live channel (workers, the api's request handlers)."""

    def __init__(self, client: redis.Redis, *, events_maxlen: int = DEFAULT_EVENTS_MAXLEN):
        self.client = client
        self.events_maxlen = events_maxlen
        self._renew = client.register_script(_RENEW_LUA)
        self._release = client.register_script(_RELEASE_LUA)
        self._admit = client.register_script(_ADMIT_LUA)

    @classmethod
    def from_url(cls, url: str, *, events_maxlen: int = DEFAULT_EVENTS_MAXLEN) -> Channel:
        client = redis.Redis.from_url(url, decode_responses=True)
        return cls(client, events_maxlen=events_maxlen)

    def close(self) -> None:
        self.client.close()

    def ping(self) -> bool:
        return bool(self.client.ping())

    # ------------------------------------------------------------ events

    def publish(self, job_id: str, event_type: str, data: dict[str, Any]) -> str:
        """Append an event; returns its stream id. The stream is trimmed approximately."""
        fields = _event_fields(event_type, data)
        entry_id = self.client.xadd(
            events_key(job_id), cast(Any, fields), maxlen=self.events_maxlen, approximate=True
        )
        return str(entry_id)

    def publish_many(self, job_id: str, events: list[tuple[str, dict[str, Any]]]) -> list[str]:
        """Append several events in order with one round trip; returns their stream ids."""
        if not events:
            return []
        pipe = self.client.pipeline(transaction=False)
        for event_type, data in events:
            pipe.xadd(events_key(job_id), cast(Any, _event_fields(event_type, data)),
                      maxlen=self.events_maxlen, approximate=True)
        return [str(entry_id) for entry_id in pipe.execute()]

    def publish_metric(
        self,
        job_id: str,
        *,
        step: int,
        epoch: int,
        values: dict[str, float],
        time_s: float | None = None,
    ) -> str:
        data = {"step": step, "epoch": epoch, "time": time_s or time.time(), "values": values}
        return self.publish(job_id, "metric", data)

    def publish_status(
        self, job_id: str, status: str, *, reason: str | None = None, **extra: Any
    ) -> str:
        data: dict[str, Any] = {"status": status, **extra}
        if reason is not None:
            data["reason"] = reason
        return self.publish(job_id, "status", data)

    def publish_lr_applied(
        self,
        job_id: str,
        *,
        change_id: str,
        learning_rate: float,
        mode: str,
        applied_step: int,
        applied_at: float | None = None,
    ) -> str:
        data = {
            "change_id": change_id,
            "learning_rate": learning_rate,
            "mode": mode,
            "applied_step": applied_step,
            "applied_at": applied_at or time.time(),
        }
        return self.publish(job_id, "lr", data)

    def publish_checkpoint(
        self, job_id: str, *, step: int, epoch: int, sha256: str, size: int
    ) -> str:
        data = {"step": step, "epoch": epoch, "sha256": sha256, "size": size}
        return self.publish(job_id, "checkpoint", data)

    def publish_log(self, job_id: str, *, level: str, message: str) -> str:
        return self.publish(job_id, "log", {"level": level, "message": message})

    def read_events(
        self,
        job_id: str,
        *,
        after: str = STREAM_START,
        count: int = 500,
        block_ms: int | None = None,
    ) -> list[Event]:
        """Events strictly after stream id ``after``; blocks up to ``block_ms`` if given."""
        reply = self.client.xread({events_key(job_id): after}, count=count, block=block_ms)
        return [_decode_event(i, f) for _, entries in reply or [] for i, f in entries]

    def last_event_id(self, job_id: str) -> str:
        entries = self.client.xrevrange(events_key(job_id), count=1)
        return str(entries[0][0]) if entries else STREAM_START

    # ------------------------------------------------------------ control

    def send_command(
        self,
        job_id: str,
        command_type: CommandType,
        data: dict[str, Any] | None = None,
        *,
        command_id: str | None = None,
    ) -> str:
        """Queue a command for the worker; returns its command id (a uuid unless given)."""
        if command_type not in COMMAND_TYPES:
            raise ValueError(f"unknown command {command_type!r}")
        command_id = command_id or str(uuid.uuid4())
        fields = {
            "command_id": command_id,
            "type": command_type,
            "data": json.dumps(data or {}, allow_nan=False),
        }
        self.client.xadd(
            control_key(job_id), cast(Any, fields), maxlen=CONTROL_MAXLEN, approximate=True
        )
        return command_id

    def read_commands(
        self, job_id: str, *, after: str = STREAM_START, count: int = 100
    ) -> list[Command]:
        """Commands after stream id ``after``, without blocking (called between steps)."""
        entries = self.client.xrange(control_key(job_id), min=f"({after}", count=count)
        return [_decode_command(i, f) for i, f in entries]

    def last_command_id(self, job_id: str) -> str:
        """Where a freshly started worker should begin reading commands."""
        entries = self.client.xrevrange(control_key(job_id), count=1)
        return str(entries[0][0]) if entries else STREAM_START

    # ------------------------------------------------------------ lease

    def acquire_lease(self, job_id: str, *, owner: str, ttl_ms: int) -> bool:
        """Take the lease if nobody holds it (or if ``owner`` already does)."""
        if self.client.set(lease_key(job_id), owner, nx=True, px=ttl_ms):
            return True
        return self.renew_lease(job_id, owner=owner, ttl_ms=ttl_ms)

    def renew_lease(self, job_id: str, *, owner: str, ttl_ms: int) -> bool:
        return bool(self._renew(keys=[lease_key(job_id)], args=[owner, ttl_ms]))

    def release_lease(self, job_id: str, *, owner: str) -> bool:
        return bool(self._release(keys=[lease_key(job_id)], args=[owner]))

    def lease_owner(self, job_id: str) -> str | None:
        value = self.client.get(lease_key(job_id))
        return str(value) if value is not None else None

    # ------------------------------------------------------------ rate limits

    def admit_lr_change(
        self, job_id: str, *, max_changes: int, window_seconds: float
    ) -> Admission:
        """Admit one learning-rate change if fewer than ``max_changes`` were admitted for
        this job in the last ``window_seconds`` (a sliding window, atomic across clients).
        """
        window_ms = max(1, round(window_seconds * 1000))
        token = uuid.uuid4().hex
        admitted, wait_ms = cast(
            list[int],
            self._admit(keys=[lr_changes_key(job_id)], args=[window_ms, max_changes, token]),
        )
        if admitted:
            return Admission(admitted=True, retry_after_s=0.0, token=token)
        return Admission(admitted=False, retry_after_s=int(wait_ms) / 1000)

    def release_lr_change(self, job_id: str, token: str) -> None:
        """Give back an admission whose change was never recorded."""
        self.client.zrem(lr_changes_key(job_id), token)

    # ------------------------------------------------------------ stream tickets

    def create_stream_ticket(self, *, job_id: str, user_id: str, ttl_s: int) -> str:
        """A short-lived, single-use ticket for clients that cannot send headers."""
        ticket = secrets.token_urlsafe(24)
        payload = json.dumps({"job_id": job_id, "user_id": user_id})
        self.client.set(ticket_key(ticket), payload, ex=ttl_s)
        return ticket

    def delete_job(self, job_id: str) -> None:
        self.client.delete(*job_keys(job_id))


class AsyncChannel:
    """The async side used by the SSE endpoint (it must not block the event loop)."""

    def __init__(self, client: aioredis.Redis):
        self.client = client

    @classmethod
    def from_url(cls, url: str) -> AsyncChannel:
        return cls(aioredis.Redis.from_url(url, decode_responses=True))

    async def close(self) -> None:
        await self.client.aclose()  # type: ignore[attr-defined]  # stubs predate aclose

    async def ping(self) -> bool:
        return bool(await self.client.ping())

    async def read_events(
        self, job_id: str, *, after: str, count: int = 500, block_ms: int | None = None
    ) -> list[Event]:
        reply = await self.client.xread({events_key(job_id): after}, count=count, block=block_ms)
        return [_decode_event(i, f) for _, entries in reply or [] for i, f in entries]

    async def redeem_stream_ticket(self, ticket: str) -> dict[str, str] | None:
        """Consume a ticket (GETDEL: a second use finds nothing)."""
        raw = await self.client.getdel(ticket_key(ticket))
        return cast(dict[str, str], json.loads(raw)) if raw else None
