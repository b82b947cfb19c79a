"""Worker-only tuning, read from ``RUDDER_WORKER_*`` (core.config has no worker section)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from workers.db_retry import default_spool_dir
from workers.hooks import Pacing


class WorkerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RUDDER_WORKER_", extra="ignore")

    # How long a job stays owned after its worker stops heart-beating: a crashed worker's
    # job is taken over within this plus one watchdog interval. The heartbeat renews every
    # ttl/4 from its own thread (numpy releases the GIL, so a busy training loop does not
    # starve it), so three renewals in a row must fail before the lease lapses.
    lease_ttl_seconds: float = Field(default=6.0, gt=0)
    # How often the in-worker watchdog looks for running jobs whose lease expired and
    # dispatches the outbox (core.dispatch).
    watchdog_interval_seconds: float = Field(default=1.0, gt=0)
    watchdog_enabled: bool = True
    # A job re-queued more often than this fails instead (Determined's max_restarts).
    max_attempts: int = Field(default=5, ge=1)
    # Publish train metrics every N optimizer steps ...
    log_every_steps: int = Field(default=10, ge=1)
    # ... but no more often than this (seconds), however fast the steps are; epoch-end
    # events too (every epoch's points still reach the DB, and the last epoch's event is
    # always sent). Each event costs the outbox thread ~0.5 ms of the GIL the loop needs;
    # four a second of each kind is as live as a chart needs.
    metrics_min_interval_seconds: float = Field(default=0.25, ge=0)
    # An interval checkpoint (the spec's checkpoint.every_steps) is skipped when the last
    # one is younger than this: each costs ~1 ms on the training thread and ~10 ms of CPU
    # beside it (serialise, hash, write, DB row) even for a small model, so a fast job
    # asking for one every 200 steps would spend a tenth of its time checkpointing (and
    # bench/service_loop.py still saw a few percent at a 1 s floor). A crash loses at most
    # this much more work. Pause, shutdown and the end of the job always checkpoint.
    checkpoint_min_interval_seconds: float = Field(default=5.0, ge=0)
    # Seconds a task waits before retrying a queued job whose old lease is still held.
    busy_retry_seconds: float = Field(default=2.0, gt=0)
    # While the database refuses writes, metric points and LR confirmations wait here (one
    # JSON-lines file per job) and are retried with backoff; the next run of the job on
    # this host sends what a dead process left behind.
    spool_dir: Path = Field(default_factory=default_spool_dir)
    # Threads the engine computes with (its kernels, products and optimizer); unset: the
    # cores this worker is given (affinity, cgroup CPU quota) or OMP_NUM_THREADS, as
    # engine.threads decides. Results are the same for any count.
    engine_threads: int | None = Field(default=None, ge=1)
    # How long a run's last writes (final status, last points, a checkpoint's row) are
    # retried through a database outage before the worker gives up on them.
    db_retry_seconds: float = Field(default=120.0, gt=0)

    # A distributed job (resources.workers > 1) waits this long for all its workers to
    # join; a gang that does not fill lets its workers go and the job goes back to the
    # queue with the reason (workers are never held idle for ever).
    gang_timeout_seconds: float = Field(default=60.0, gt=0)
    # How long a rank waits in a collective for the others before it gives up: a rank
    # that was stopped (SIGSTOP) or cut off ends the generation after this. (A killed
    # rank's peers notice at once: its sockets close.)
    dist_timeout_seconds: float = Field(default=60.0, gt=0)
    # The address the other ranks reach this worker's rank 0 at; unset: the address of
    # the interface that routes to Redis (127.0.0.1 when Redis is local).
    gang_host: str | None = None

    def pacing(self) -> Pacing:
        return Pacing(log_every=self.log_every_steps,
                      min_publish_interval=self.metrics_min_interval_seconds,
                      checkpoint_min_interval=self.checkpoint_min_interval_seconds)


@lru_cache(maxsize=1)
def get_worker_settings() -> WorkerSettings:
    return WorkerSettings()
