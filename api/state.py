"""Process-wide resources the api opens at startup and closes at shutdown."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from api import telemetry
from core.channel import AsyncChannel, Channel
from core.config import Settings
from core.db import make_engine, make_sessionmaker
from core.dispatch import DispatcherThread, dispatcher_for
from core.models import User
from core.storage import ObjectStore, open_store

log = logging.getLogger("rudder.api")


class TokenCache:
    """Recently verified tokens, so a busy client does not cost a query per request.

    Keyed by the token's hash; entries live ``ttl`` seconds, which bounds how long a
    revoked token keeps working on this process.
    """

    def __init__(self, *, ttl: float = 10.0, size: int = 1024):
        self.ttl = ttl
        self.size = size
        self._entries: dict[str, tuple[float, str, str]] = {}
        self._lock = threading.Lock()

    def get(self, token_hash: str) -> User | None:
        with self._lock:
            entry = self._entries.get(token_hash)
        if entry is None or entry[0] < time.monotonic():
            return None
        # A detached stand-in: handlers only read the id and the name.
        return User(id=entry[1], name=entry[2])

    def put(self, token_hash: str, user: User) -> None:
        if self.ttl <= 0:
            return
        with self._lock:
            if len(self._entries) >= self.size:
                self._entries.clear()
            self._entries[token_hash] = (time.monotonic() + self.ttl, user.id, user.name)


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

    @classmethod
    def open(cls, settings: Settings) -> ServiceState:
        engine = make_engine(settings.database_url, sqlite_single_connection=True)
        sessions = make_sessionmaker(engine)
        channel = async_channel = dispatcher = None
        if settings.redis_url:
            channel = Channel.from_url(
                settings.redis_url, events_maxlen=settings.stream.events_maxlen
            )
            async_channel = AsyncChannel.from_url(settings.redis_url)
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
        )

    async def close(self) -> None:
        if self.dispatcher is not None:
            self.dispatcher.close()
        if self.async_channel is not None:
            await self.async_channel.close()
        if self.channel is not None:
            self.channel.close()
        self.engine.dispose()
