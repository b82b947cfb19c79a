"""Celery tasks: thin wrappers that pass ids, never objects (see workers.lifecycle)."""

from __future__ import annotations

from typing import Any

from celery.signals import worker_ready, worker_shutdown, worker_shutting_down

from workers.celery_app import TRAIN_TASK, celery_app
from workers.hooks import shutdown_requested
from workers.lifecycle import LeaseBusy, run_job
from workers.settings import get_worker_settings
from workers.watchdog import start_watchdog, stop_watchdog

# Enough retries to outlast a stale lease several times over (ttl 30 s, retry every 2 s).
BUSY_MAX_RETRIES = 300


@celery_app.task(name=TRAIN_TASK, bind=True, max_retries=BUSY_MAX_RETRIES)
def train(self: Any, job_id: str) -> str:
    """Train one job to an outcome (succeeded, paused, cancelled, failed) or skip it."""
    try:
        return run_job(str(job_id)).result
    except LeaseBusy as exc:
        raise self.retry(exc=exc, countdown=get_worker_settings().busy_retry_seconds) from exc


@worker_ready.connect
def _start_watchdog(**_: Any) -> None:
    if get_worker_settings().watchdog_enabled:
        start_watchdog()


@worker_shutting_down.connect
def _checkpoint_and_requeue_running_job(**_: Any) -> None:
    # Warm shutdown (SIGTERM) would otherwise wait for the whole training run to end.
    shutdown_requested.set()


@worker_shutdown.connect
def _stop_watchdog(**_: Any) -> None:
    stop_watchdog()
