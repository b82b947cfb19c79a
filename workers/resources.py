"""Per-process connections of a worker: the live channel and the object store."""

from __future__ import annotations

import logging
from functools import lru_cache

from core.channel import Channel
from core.config import get_settings
from core.db import get_sessionmaker
from core.dispatch import Dispatcher, dispatcher_for
from core.storage import ObjectStore, store_from_settings

log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def get_channel() -> Channel:
    settings = get_settings()
    if not settings.redis_url:
        raise RuntimeError("RUDDER_REDIS_URL is not set")
    return Channel.from_url(settings.redis_url, events_maxlen=settings.stream.events_maxlen)


@lru_cache(maxsize=1)
def get_store() -> ObjectStore:
    return store_from_settings()


@lru_cache(maxsize=1)
def get_dispatcher() -> Dispatcher:
    """This process's outbox dispatcher (the watchdog runs it; see core.dispatch)."""
    return dispatcher_for(get_settings(), get_sessionmaker(), get_channel())


def dispatch_now() -> None:
    """Send what is in the outbox now instead of at the next watchdog pass; if the broker
    is down the jobs stay in the outbox (any dispatcher sends them later)."""
    try:
        get_dispatcher().send_pending()
    except Exception:  # noqa: BLE001 - the outbox keeps the job; this was only a shortcut
        log.warning("could not dispatch now; the outbox keeps the job", exc_info=True)
