"""Celery tasks: thin wrappers that pass ids, never objects (see workers.lifecycle)."""

from __future__ import annotations

import logging
from typing import Any

# first: the engine picks numpy's BLAS kernels, which only works before numpy is loaded
import workers.engine_api  # noqa: F401

# isort: split
from celery.signals import (
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
    worker_shutting_down,
)

from workers import heartbeat, resources
from workers.celery_app import QUEUES, TRAIN_TASK, celery_app
from workers.gang.lifecycle import join_gang
from workers.hooks import shutdown_requested
from workers.lifecycle import LeaseBusy, run_job
from workers.settings import WorkerSettings, get_worker_settings
from workers.watchdog import start_watchdog, stop_watchdog

log = logging.getLogger(__name__)

# Enough retries to outlast a stale lease several times over (ttl 30 s, retry every 2 s).
BUSY_MAX_RETRIES = 300


@celery_app.task(name=TRAIN_TASK, bind=True, max_retries=BUSY_MAX_RETRIES)
def train(self: Any, job_id: str, generation: int | None = None) -> str:
    """Train one job to an outcome (succeeded, paused, cancelled, failed) or skip it.
    With ``generation``: join that generation of a distributed job as one of its ranks
    (rank 0, which holds the job, asked for it; workers.gang)."""
    _start_heartbeat()  # no-op once running; starts it under the solo pool
    try:
        with heartbeat.working_on(str(job_id)):
            if generation is not None:
                return join_gang(resources.get_channel(), str(job_id), int(generation)).result
            outcome = run_job(str(job_id))
    except LeaseBusy as exc:
        raise self.retry(exc=exc, countdown=get_worker_settings().busy_retry_seconds) from exc
    if outcome.then_join is None:
        return outcome.result
    # this job's gang gave way to an older one (its lease is released): take a seat there
    older_job, older_generation = outcome.then_join
    with heartbeat.working_on(older_job):
        joined = join_gang(resources.get_channel(), older_job, older_generation)
    return f"{outcome.result}; then {older_job}: {joined.result}"


def _served_queues() -> list[str]:
    """The queues this worker consumes (``-Q``), selected before the pool forks."""
    selected = celery_app.amqp.queues.consume_from
    return sorted(selected) if selected else list(QUEUES)


@worker_process_init.connect
def _start_heartbeat(**_: Any) -> None:
    # In the pool child that trains, so the heartbeat can name the job it is running.
    try:
        heartbeat.start_heartbeat(resources.get_channel(), _served_queues())
    except Exception:  # noqa: BLE001 - no Redis yet: the task itself retries later
        heartbeat.log.warning("worker heartbeat not started", exc_info=True)


@worker_process_shutdown.connect
def _stop_heartbeat(**_: Any) -> None:
    heartbeat.stop_heartbeat()


def _engine_threads() -> str:
    """Apply the worker's thread setting, if any, and say what the engine computes with.
    Runs when this module is imported, before a prefork pool forks its children."""
    configured = WorkerSettings().engine_threads  # not the cached settings: tests set theirs
    if configured is None:
        return workers.engine_api.engine.threads.describe()
    workers.engine_api.kernel_threads.set_count(configured)
    return f"engine threads: {configured} (RUDDER_WORKER_ENGINE_THREADS={configured})"


_ENGINE_THREADS = _engine_threads()


@worker_ready.connect
def _start_watchdog(**_: Any) -> None:
    log.info("%s", workers.engine_api.engine.blas_kernels.describe())
    log.info("%s", _ENGINE_THREADS)
    if get_worker_settings().watchdog_enabled:
        start_watchdog()


@worker_shutting_down.connect
def _checkpoint_and_requeue_running_job(**_: Any) -> None:
    # Warm shutdown (SIGTERM) would otherwise wait for the whole training run to end.
    shutdown_requested.set()


@worker_shutdown.connect
def _stop_watchdog(**_: Any) -> None:
    stop_watchdog()
    heartbeat.stop_heartbeat()  # the solo pool's heartbeat runs in this process
