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
  ``commands`` is the same window for the job's other step-boundary commands.

Per worker process: ``rudder:worker:{worker_id}`` holds its latest heartbeat (JSON of
:class:`core.events.WorkerHeartbeat`) with a TTL, so a worker that died drops out;
``rudder:workers:telemetry`` is a Stream of every heartbeat of the last hour. The
Celery broker keeps each queue's waiting tasks in a list named after the queue.

Api processes: ``rudder:tokens:revoked`` is a pub/sub channel carrying the hash of each
revoked token, so every api process drops it from its token cache at once.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

import redis
import redis.asyncio as aioredis
from pydantic import ValidationError
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from core.events import (
    EVENT_TYPES,
    CheckpointEvent,
    Command,
    JobEvent,
    JobStatusName,
    LogEvent,
    LREvent,
    LRMode,
    MetricEvent,
    StatusEvent,
    WorkerHeartbeat,
    parse_command,
    parse_event,
)

log = logging.getLogger(__name__)

STREAM_START = "0-0"
TOKEN_REVOCATIONS = "rudder:tokens:revoked"
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


def commands_rate_key(job_id: str) -> str:
    """The rate-limit window of a job's other step-boundary commands."""
    return job_prefix(job_id) + "commands"


def gang_generation_key(job_id: str) -> str:
    """A distributed job's generation counter: a new gang (after a failure) is the next."""
    return job_prefix(job_id) + "gang"


def gang_key(job_id: str, generation: int) -> str:
    """One generation's gang: a hash of its size, seats taken, state and rank 0's address."""
    return job_prefix(job_id) + f"gang:{generation}"


def ticket_key(ticket: str) -> str:
    return f"rudder:stream-ticket:{ticket}"


WORKER_PREFIX = "rudder:worker:"
# Every worker's heartbeats of the last hour, oldest first (the System view's history);
# entry ids are Redis times in ms, so the stream is trimmed by age.
WORKER_TELEMETRY = "rudder:workers:telemetry"
TELEMETRY_KEPT_MS = 3_600_000


def worker_key(worker_id: str) -> str:
    return WORKER_PREFIX + worker_id


def gangs_gathering_key(queue: str) -> str:
    """The gangs gathering workers on ``queue``: a sorted set of "<job id>:<generation>"
    scored by the job's submit time, the order in which they may keep workers waiting."""
    return f"rudder:gangs:gathering:{queue}"


def gang_gathering_alive_key(queue: str, member: str) -> str:
    """Present (with a short expiry its rank 0 keeps renewing) while that gang gathers."""
    return f"{gangs_gathering_key(queue)}:alive:{member}"


def job_keys(job_id: str) -> list[str]:
    return [events_key(job_id), control_key(job_id), lease_key(job_id), lr_changes_key(job_id),
            commands_rate_key(job_id), gang_generation_key(job_id)]


@dataclass(frozen=True)
class Event:
    """One entry of a job's events stream: its stream id and the typed event."""

    id: str
    event: JobEvent

    @property
    def type(self) -> str:
        return self.event.type

    @property
    def data(self) -> dict[str, Any]:
        return self.event.data()


@dataclass(frozen=True)
class ReceivedCommand:
    """One control command as read; ``stream_id`` is where the reader resumes."""

    stream_id: str
    command: Command

    @property
    def command_id(self) -> str:
        return self.command.command_id

    @property
    def type(self) -> str:
        return self.command.type

    @property
    def data(self) -> dict[str, Any]:
        return self.command.model_dump(mode="json", exclude={"type", "command_id"})


def _decode_events(reply: Any) -> list[Event]:
    events = []
    for _, entries in reply or []:
        for entry_id, fields in entries:
            try:
                event = parse_event(fields.get("type", ""), json.loads(fields["data"]))
            except (KeyError, ValueError, ValidationError) as exc:
                # Only Channel writes this stream; an entry it cannot read is from another
                # version. Skipping it keeps the stream readable for everything after it.
                log.warning("skipping unreadable event %s: %r", entry_id, exc)
                continue
            events.append(Event(id=entry_id, event=event))
    return events


def _decode_commands(entries: Any) -> list[ReceivedCommand]:
    commands = []
    for entry_id, fields in entries:
        try:
            data = json.loads(fields.get("data", "{}"))
            command = parse_command(fields["type"], fields["command_id"], data)
        except (KeyError, ValueError, ValidationError) as exc:
            log.warning("skipping malformed control entry %s: %r", entry_id, exc)
            continue
        commands.append(ReceivedCommand(stream_id=entry_id, command=command))
    return commands


def _event_fields(event: JobEvent) -> dict[str, str]:
    if event.type not in EVENT_TYPES:  # a model outside the JobEvent union
        raise ValueError(f"unknown event type {event.type!r}")
    # allow_nan=False: a NaN would be invalid JSON for every SSE client.
    return {"type": event.type, "data": json.dumps(event.data(), allow_nan=False)}


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

    def __init__(self, client: redis.Redis[str], *, events_maxlen: int = DEFAULT_EVENTS_MAXLEN):
        self.client = client
        self.events_maxlen = events_maxlen
        self._renew = client.register_script(_RENEW_LUA)
        self._release = client.register_script(_RELEASE_LUA)
        self._admit = client.register_script(_ADMIT_LUA)

    @classmethod
    def from_url(
        cls, url: str, *, events_maxlen: int = DEFAULT_EVENTS_MAXLEN,
        socket_timeout: float | None = None,
    ) -> Channel:
        """``socket_timeout`` bounds each command (and the connect): a Redis that hangs
        then fails like one that is down instead of holding the caller forever."""
        client = redis.Redis.from_url(url, decode_responses=True, socket_timeout=socket_timeout,
                                      socket_connect_timeout=socket_timeout)
        return cls(client, events_maxlen=events_maxlen)

    def close(self) -> None:
        self.client.close()

    def ping(self) -> bool:
        return bool(self.client.ping())

    # ------------------------------------------------------------ events

    def publish(self, job_id: str, event: JobEvent) -> str:
        """Append an event; returns its stream id. The stream is trimmed approximately."""
        fields = _event_fields(event)
        entry_id = self.client.xadd(
            events_key(job_id), cast(Any, fields), maxlen=self.events_maxlen, approximate=True
        )
        return str(entry_id)

    def publish_many(self, job_id: str, events: list[JobEvent]) -> list[str]:
        """Append several events in order with one round trip; returns their stream ids."""
        if not events:
            return []
        pipe = self.client.pipeline(transaction=False)
        for event in events:
            pipe.xadd(events_key(job_id), cast(Any, _event_fields(event)),
                      maxlen=self.events_maxlen, approximate=True)
        return [str(entry_id) for entry_id in pipe.execute()]

    # Shorthands that build the event model and publish it.

    def publish_metric(
        self,
        job_id: str,
        *,
        step: int,
        epoch: int,
        values: dict[str, float],
        epochs_done: int | None = None,
        time_s: float | None = None,
    ) -> str:
        return self.publish(job_id, MetricEvent(
            step=step, epoch=epoch, epochs_done=epoch if epochs_done is None else epochs_done,
            time=time_s or time.time(), values=values,
        ))

    def publish_status(
        self,
        job_id: str,
        status: JobStatusName,
        *,
        reason: str | None = None,
        step: int | None = None,
        command_id: str | None = None,
    ) -> str:
        return self.publish(job_id, StatusEvent(status=status, reason=reason, step=step,
                                                command_id=command_id))

    def publish_lr_applied(
        self,
        job_id: str,
        *,
        change_id: str,
        learning_rate: float,
        mode: LRMode,
        applied_step: int,
        applied_at: float | None = None,
    ) -> str:
        return self.publish(job_id, LREvent(
            change_id=change_id, status="applied", learning_rate=learning_rate, mode=mode,
            applied_step=applied_step, applied_at=applied_at or time.time(),
        ))

    def publish_lr_rejected(
        self, job_id: str, *, change_id: str, learning_rate: float, mode: LRMode, reason: str
    ) -> str:
        return self.publish(job_id, LREvent(
            change_id=change_id, status="rejected", learning_rate=learning_rate, mode=mode,
            reason=reason,
        ))

    def publish_checkpoint(
        self, job_id: str, *, step: int, epoch: int, sha256: str, size: int
    ) -> str:
        return self.publish(job_id, CheckpointEvent(step=step, epoch=epoch, sha256=sha256,
                                                    size=size))

    def publish_log(self, job_id: str, *, level: str, message: str) -> str:
        return self.publish(job_id, LogEvent(level=level, message=message))

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
        return _decode_events(reply)

    def last_event_id(self, job_id: str) -> str:
        entries = self.client.xrevrange(events_key(job_id), count=1)
        return str(entries[0][0]) if entries else STREAM_START

    # ------------------------------------------------------------ control

    def send_command(self, job_id: str, command: Command) -> str:
        """Queue a command for the worker; returns its command id."""
        fields = {
            "command_id": command.command_id,
            "type": command.type,
            "data": json.dumps(
                command.model_dump(mode="json", exclude={"type", "command_id"}),
                allow_nan=False,
            ),
        }
        self.client.xadd(
            control_key(job_id), cast(Any, fields), maxlen=CONTROL_MAXLEN, approximate=True
        )
        return command.command_id

    def read_commands(
        self, job_id: str, *, after: str = STREAM_START, count: int = 100
    ) -> list[ReceivedCommand]:
        """Commands after stream id ``after``, without blocking (called between steps)."""
        entries = self.client.xrange(control_key(job_id), min=f"({after}", count=count)
        return _decode_commands(entries)

    def wait_commands(
        self, job_id: str, *, after: str, block_ms: int, count: int = 100
    ) -> tuple[list[ReceivedCommand], str]:
        """Wait up to ``block_ms`` for commands after ``after``; returns them and the
        position to read from next (past malformed entries too, which are skipped)."""
        reply = self.client.xread({control_key(job_id): after}, count=count, block=block_ms)
        entries = [entry for _, stream in reply or [] for entry in stream]
        position = str(entries[-1][0]) if entries else after
        return _decode_commands(entries), position

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

    def server_run_id(self) -> str:
        """Redis' ``run_id``: a new one after every restart of the server."""
        return str(self.client.info("server")["run_id"])

    def leased_jobs(self, job_ids: list[str]) -> set[str]:
        """The ids among ``job_ids`` that some worker holds the lease of (one MGET)."""
        if not job_ids:
            return set()
        owners = self.client.mget([lease_key(job_id) for job_id in job_ids])
        return {job_id for job_id, owner in zip(job_ids, owners, strict=True) if owner}

    def release_leases_of(self, holder_prefix: str) -> list[str]:
        """Drop every lease whose holder starts with ``holder_prefix`` (``host:pid:``
        of a process known to be dead); returns the job ids. Compare-and-delete, so a
        lease another worker took meanwhile stays."""
        released = []
        for key in self.client.scan_iter(match=lease_key("*"), count=500):
            owner = self.client.get(key)
            if owner is None or not str(owner).startswith(holder_prefix):
                continue
            before, after = lease_key("\0").split("\0")
            job_id = str(key).removeprefix(before).removesuffix(after)
            if self._release(keys=[key], args=[owner]):
                released.append(job_id)
        return released

    # ------------------------------------------------------------ rate limits

    def admit(self, key: str, *, max_changes: int, window_seconds: float) -> Admission:
        """Admit one request if fewer than ``max_changes`` were admitted under ``key`` in
        the last ``window_seconds`` (a sliding window, atomic across clients)."""
        window_ms = max(1, round(window_seconds * 1000))
        token = uuid.uuid4().hex
        admitted, wait_ms = cast(
            list[int], self._admit(keys=[key], args=[window_ms, max_changes, token]))
        if admitted:
            return Admission(admitted=True, retry_after_s=0.0, token=token)
        return Admission(admitted=False, retry_after_s=int(wait_ms) / 1000)

    def release(self, key: str, token: str) -> None:
        """Give back an admission whose request was never recorded."""
        self.client.zrem(key, token)

    def admit_lr_change(
        self, job_id: str, *, max_changes: int, window_seconds: float
    ) -> Admission:
        """:meth:`admit` on the job's learning-rate window."""
        return self.admit(lr_changes_key(job_id), max_changes=max_changes,
                          window_seconds=window_seconds)

    def release_lr_change(self, job_id: str, token: str) -> None:
        self.release(lr_changes_key(job_id), token)

    # ------------------------------------------------------------ stream tickets

    def create_stream_ticket(self, *, job_id: str, user_id: str, ttl_s: int,
                             token_hash: str | None = None) -> str:
        """A short-lived, single-use ticket for clients that cannot send headers. It names
        the token that asked for it, so it dies with that token (api/routes/events.py)."""
        ticket = secrets.token_urlsafe(24)
        payload = json.dumps({"job_id": job_id, "user_id": user_id, "token_hash": token_hash})
        self.client.set(ticket_key(ticket), payload, ex=ttl_s)
        return ticket

    def announce_token_revoked(self, token_hash: str) -> None:
        """Tell every api process to stop trusting its cached copy of this token."""
        self.client.publish(TOKEN_REVOCATIONS, token_hash)

    def publish_heartbeat(self, heartbeat: WorkerHeartbeat, *, ttl_s: int) -> None:
        """Store a worker's heartbeat (it vanishes ``ttl_s`` after the last one) and append
        it to the last hour's history."""
        raw = heartbeat.model_dump_json()
        self.client.set(worker_key(heartbeat.worker_id), raw, ex=ttl_s)
        oldest = f"{int(heartbeat.time * 1000) - TELEMETRY_KEPT_MS}-0"
        try:
            self.client.xadd(WORKER_TELEMETRY, {"data": raw}, minid=oldest, approximate=True)
        except redis.ResponseError:  # a Redis before 6.2 (no MINID): bound it by length
            self.client.xadd(WORKER_TELEMETRY, {"data": raw}, maxlen=100_000, approximate=True)

    def worker_history(self, *, since_s: float) -> list[WorkerHeartbeat]:
        """Every heartbeat sent since ``since_s`` (unix seconds, the worker's clock),
        oldest first."""
        beats = []
        for _, fields in self.client.xrange(WORKER_TELEMETRY, min=f"{int(since_s * 1000)}-0"):
            try:
                beat = WorkerHeartbeat.model_validate_json(fields["data"])
            except (ValidationError, KeyError):
                log.warning("ignoring a malformed worker heartbeat in the history")
                continue
            if beat.time >= since_s:
                beats.append(beat)
        return beats

    def remove_heartbeat(self, worker_id: str) -> None:
        self.client.delete(worker_key(worker_id))

    def worker_heartbeats(self) -> list[WorkerHeartbeat]:
        """The live workers' latest heartbeats, by worker id (malformed ones skipped)."""
        keys = sorted(self.client.scan_iter(match=WORKER_PREFIX + "*", count=500))
        beats = []
        for raw in self.client.mget(keys) if keys else []:
            if raw is None:
                continue  # expired between SCAN and MGET
            try:
                beats.append(WorkerHeartbeat.model_validate_json(raw))
            except ValidationError:
                log.warning("ignoring a malformed worker heartbeat")
        return beats

    def queue_lengths(self, queues: list[str]) -> dict[str, int]:
        """Tasks waiting in each Celery queue (Kombu's Redis transport: one list each)."""
        pipe = self.client.pipeline(transaction=False)
        for name in queues:
            pipe.llen(name)
        return {name: int(n) for name, n in zip(queues, pipe.execute(), strict=True)}

    def delete_job(self, job_id: str) -> None:
        self.client.delete(*job_keys(job_id))


class AsyncChannel:
    """The async side used by the SSE endpoint (it must not block the event loop)."""

    def __init__(self, client: aioredis.Redis[str],
                 subscriber: aioredis.Redis[str] | None = None):
        self.client = client
        self.subscriber = subscriber if subscriber is not None else client

    @classmethod
    def from_url(cls, url: str, *, socket_timeout: float | None = None) -> AsyncChannel:
        """``socket_timeout`` must exceed the longest XREAD BLOCK it will serve.

        Subscriptions get a client of their own that never retries: redis-py's default
        retry sleeps a jittered, doubling backoff (up to 10 s per try, nested in the
        connect's own retries) before it looks again, so a Redis that came back could go
        unheard for tens of seconds. A subscription error reaches the caller at once
        instead, and the caller's fixed retry interval bounds the time to resubscribe."""
        def client(retry: Retry | None) -> aioredis.Redis[str]:
            extra: dict[str, Any] = {} if retry is None else {"retry": retry}
            return aioredis.Redis.from_url(url, decode_responses=True,
                                           socket_timeout=socket_timeout,
                                           socket_connect_timeout=socket_timeout, **extra)
        return cls(client(None), client(Retry(NoBackoff(), 0)))

    async def close(self) -> None:
        await self.client.aclose()  # type: ignore[attr-defined]  # stubs predate aclose
        if self.subscriber is not self.client:
            await self.subscriber.aclose()  # type: ignore[attr-defined]

    async def ping(self) -> bool:
        return bool(await self.client.ping())

    async def read_events(
        self, job_id: str, *, after: str, count: int = 500, block_ms: int | None = None
    ) -> list[Event]:
        reply = await self.client.xread({events_key(job_id): after}, count=count, block=block_ms)
        return _decode_events(reply)

    async def redeem_stream_ticket(self, ticket: str) -> dict[str, str | None] | None:
        """Consume a ticket (GETDEL: a second use finds nothing)."""
        raw = await self.client.getdel(ticket_key(ticket))
        return cast(dict[str, str | None], json.loads(raw)) if raw else None

    async def token_revocations(self) -> AsyncIterator[str | None]:
        """Revoked token hashes as they are announced; None each time the subscription is
        (re)made, since announcements sent while it was down are lost. Raises a
        ``redis.RedisError`` when Redis cannot be reached."""
        pubsub = self.subscriber.pubsub()
        try:
            await pubsub.subscribe(TOKEN_REVOCATIONS)
            async for message in pubsub.listen():
                if message["type"] == "subscribe":
                    yield None
                elif message["type"] == "message":
                    yield str(message["data"])
        finally:
            await pubsub.aclose()  # type: ignore[attr-defined]  # stubs predate aclose
