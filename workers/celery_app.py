"""The Celery application: configuration only (tasks live in workers.tasks).

The api imports this module to enqueue ``rudder.train`` by name; it must therefore stay
free of engine imports. Start a training worker with::

    celery -A workers.celery_app worker -Q cpu --concurrency=1 --pool=prefork

and a validator (data-set validation only, no engine loaded) with
``celery -A workers.validation_app worker -Q datasets --pool=solo`` (workers.validation_app).
A training worker can validate too (``-Q cpu,datasets``): it registers both tasks.
"""

from __future__ import annotations

from celery import Celery
from kombu.entity import Queue

from core.config import get_settings
from core.queue import QUEUES, TRAIN_TASK, VALIDATE_DATASET_TASK, VALIDATION_QUEUE

__all__ = ["QUEUES", "TRAIN_TASK", "app", "celery_app"]

# Kombu's Redis transport re-delivers a message that was not acked within this time. A
# task holds its message for the whole training run (acks_late), so this must outlast the
# longest run; a duplicate delivery is harmless anyway (the job lease refuses it), while a
# crashed worker's job comes back sooner through the lease watchdog.
VISIBILITY_TIMEOUT_SECONDS = 12 * 60 * 60


def make_celery(imports: tuple[str, ...] = ("workers.tasks", "workers.datasets.tasks")
                ) -> Celery:
    """The app every Rudder worker runs; ``imports`` are the modules whose tasks it has."""
    app = Celery("rudder")
    url = get_settings().redis_url or "redis://127.0.0.1:6379/0"
    app.conf.update(
        broker_url=url,
        # Results live in the DB (job rows); Celery's result backend would be a second truth.
        result_backend=None,
        task_ignore_result=True,
        task_acks_late=True,
        # A worker killed mid-task must not lose the message on the way out either.
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        worker_concurrency=1,
        task_queues=[Queue(name) for name in (*QUEUES, VALIDATION_QUEUE)],
        task_default_queue="cpu",
        task_routes={TRAIN_TASK: {"queue": "cpu"},
                     VALIDATE_DATASET_TASK: {"queue": VALIDATION_QUEUE}},
        broker_transport_options={"visibility_timeout": VISIBILITY_TIMEOUT_SECONDS},
        broker_connection_retry_on_startup=True,
        task_serializer="json",
        accept_content=["json"],
        worker_hijack_root_logger=False,
        imports=imports,
    )
    return app


celery_app = make_celery()
app = celery_app  # `celery -A workers.celery_app` finds `app`
