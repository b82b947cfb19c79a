"""Per-process connections of a worker: the live channel and the object store."""

from __future__ import annotations

from functools import lru_cache

from core.channel import Channel
from core.config import get_settings
from core.storage import ObjectStore, store_from_settings


@lru_cache(maxsize=1)
def get_channel() -> Channel:
    settings = get_settings()
    if not settings.redis_url:
        raise RuntimeError("RUDDER_REDIS_URL is not set")
    return Channel.from_url(settings.redis_url, events_maxlen=settings.stream.events_maxlen)


@lru_cache(maxsize=1)
def get_store() -> ObjectStore:
    return store_from_settings()


def enqueue(job_id: str, queue: str) -> None:
    """Send ``rudder.train(job_id)`` through core's send-only client."""
    from core.queue import enqueue_training

    broker = get_settings().redis_url
    if not broker:
        raise RuntimeError("RUDDER_REDIS_URL is not set")
    enqueue_training(job_id, queue=queue, broker_url=broker)
