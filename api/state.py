"""Process-wide resources the api opens at startup and closes at shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime

from fastapi.concurrency import run_in_threadpool
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from api import telemetry
from api.services.inspector import Inspector, inspector_for
from api.streams import OpenStreams
from core import repositories
from core.channel import AsyncChannel, Channel
from core.config import InspectorSettings, Settings
from core.db import make_engine, make_sessionmaker
from core.dispatch import DispatcherThread, dispatcher_for
from core.models import User, utcnow
from core.storage import ObjectStore, open_store

log = logging.getLogger("rudder.api")


class TokenCache:
    """Recently verified tokens, so a busy client does not cost a query per request.

    Keyed by the token's hash. An entry lives ``ttl`` seconds at most (never past the
    token's expiry). A revocation announced through Redis evicts it at once (see
    :meth:`ServiceState.follow_token_revocations`); ``ttl`` bounds how long a revoked
    token keeps working on this process only while Redis cannot tell it.
    """

    def __init__(self, *, ttl: float = 10.0, size: int = 1024):
        self.ttl = ttl
        self.size = size
        self._entries: dict[str, tuple[float, str, str]] = {}
        # Hashes evicted in the last ``ttl`` seconds: a lookup that read the row just
        # before the revocation committed must not put the token back afterwards.
        self._revoked: dict[str, float] = {}
        self._lock = threading.Lock()

    def get(self, token_hash: str) -> User | None:
        with self._lock:
            entry = self._entries.get(token_hash)
        if entry is None or entry[0] < time.monotonic():
            return None
        # A detached stand-in: handlers only read the id and the name.
        return User(id=entry[1], name=entry[2])

    def put(self, token_hash: str, user: User, *, expires_at: datetime | None = None) -> None:
        now = time.monotonic()
        lifetime = self.ttl
        if expires_at is not None:
            lifetime = min(lifetime, (expires_at - utcnow()).total_seconds())
        if lifetime <= 0:
            return
        with self._lock:
            if self._revoked.get(token_hash, 0.0) > now:
                return
            if len(self._entries) >= self.size:
                self._entries.clear()
            self._entries[token_hash] = (now + lifetime, user.id, user.name)

    def evict(self, token_hash: str) -> None:
        now = time.monotonic()
        with self._lock:
            self._entries.pop(token_hash, None)
            if len(self._revoked) >= self.size:
                self._revoked = {h: t for h, t in self._revoked.items() if t > now}
            self._revoked[token_hash] = now + self.ttl

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


@dataclass
class ServiceState:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    store: ObjectStore
    channel: Channel | None
    async_channel: AsyncChannel | None
    dispatcher: DispatcherThread | None = None
    token_cache: TokenCache = field(default_factory=lambda: TokenCache())
    # The engine's questions go to the process-wide inspector (api/services/inspector.py).
    inspector: Inspector = field(default_factory=lambda: inspector_for(InspectorSettings()))
    streams: OpenStreams = field(default_factory=OpenStreams)
    _revocations: asyncio.Task[None] | None = field(default=None, init=False, repr=False)
    _stream_checks: asyncio.Task[None] | None = field(default=None, init=False, repr=False)

    @classmethod
    def open(cls, settings: Settings) -> ServiceState:
        engine = make_engine(
            settings.database_url, lock_timeout_s=settings.database_lock_timeout_seconds
        )
        sessions = make_sessionmaker(engine)
        channel = async_channel = dispatcher = None
        if settings.redis_url:
            # A Redis that stops answering (frozen, partitioned) must cost a request a few
            # seconds and a 503, not a worker thread forever.
            timeout = settings.redis_timeout_seconds
            channel = Channel.from_url(
                settings.redis_url, events_maxlen=settings.stream.events_maxlen,
                socket_timeout=timeout,
            )
            async_channel = AsyncChannel.from_url(
                settings.redis_url, socket_timeout=timeout + settings.stream.block_ms / 1000
            )
            dispatcher = DispatcherThread(
                dispatcher_for(settings, sessions, channel),
                poll_seconds=settings.dispatch.poll_seconds,
                on_failure=telemetry.ENQUEUE_FAILURES.inc,
            ).start()
        else:
            log.warning("RUDDER_REDIS_URL is not set: live events and enqueueing are off")
        store = open_store(
            settings.storage_url, endpoint_url=settings.s3_endpoint_url, region=settings.s3_region
        )
        return cls(
            settings=settings,
            engine=engine,
            sessions=sessions,
            store=store,
            channel=channel,
            async_channel=async_channel,
            dispatcher=dispatcher,
            token_cache=TokenCache(ttl=settings.auth_cache_seconds),
            inspector=inspector_for(settings.inspector),
        )

    def start(self) -> None:
        """Start what runs beside the requests (call from the event loop)."""
        self.inspector.warm()
        loop = asyncio.get_running_loop()
        self.streams.bind(loop)
        if self.async_channel is not None:
            self._revocations = loop.create_task(
                self.follow_token_revocations(self.async_channel)
            )
        if self.settings.auth_enabled:
            self._stream_checks = loop.create_task(
                self.check_stream_tokens(max(1.0, self.settings.auth_cache_seconds))
            )

    async def check_stream_tokens(self, every: float) -> None:
        """End the streams whose token is no longer valid (revoked while Redis could not
        announce it, or expired), looking every ``every`` seconds."""
        while True:
            await asyncio.sleep(every)
            opened_with = self.streams.tokens()
            if not opened_with:
                continue
            try:
                valid = await run_in_threadpool(self._valid_tokens, opened_with)
            except Exception as exc:  # noqa: BLE001 - the database is down: look again later
                log.warning("could not check the tokens of open streams (%s)", exc)
                continue
            for token_hash in opened_with:
                if token_hash not in valid:
                    self.streams.end(token_hash)

    def _valid_tokens(self, token_hashes: list[str]) -> set[str]:
        with self.sessions() as session:
            return repositories.valid_token_hashes(session, token_hashes=token_hashes)

    async def follow_token_revocations(
        self, channel: AsyncChannel, *, retry_seconds: float = 1.0
    ) -> None:
        """Evict each token another process (or this one) revokes, for as long as the app
        runs. Announcements made while the subscription was down are lost, so each
        (re)subscription empties the cache: every token is looked up again once."""
        failing = False  # log once per outage, not once per retry
        while True:
            try:
                async for token_hash in channel.token_revocations():
                    if token_hash is None:
                        self.token_cache.clear()
                        if failing:
                            log.info("following token revocations again")
                        failing = False
                    else:
                        self.token_cache.evict(token_hash)
                        self.streams.end(token_hash)
            except Exception as exc:  # noqa: BLE001 - never end: see below
                # Redis errors, and whatever else a reconnect raises: uvloop raised a
                # RuntimeError ("the handler is closed") from redis-py's reconnect after a
                # Redis restart, which ended this task and left the process deaf to
                # revocations until it restarted. Cancellation (close) still ends it.
                if not failing:
                    log.warning("token revocations not followed (%s: %s); cached tokens "
                                "expire within %g s", type(exc).__name__, exc,
                                self.token_cache.ttl)
                failing = True
            await asyncio.sleep(retry_seconds)

    async def close(self) -> None:
        for task in (self._revocations, self._stream_checks):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.dispatcher is not None:
            self.dispatcher.close()
        if self.async_channel is not None:
            await self.async_channel.close()
        if self.channel is not None:
            self.channel.close()
        self.engine.dispose()
