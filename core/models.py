"""SQLAlchemy 2.0 models: the durable record of users, jobs, metrics, LR changes, checkpoints.

Alembic (``migrations/``) is the only way these tables are created. Relationships are
``lazy="raise"`` so an accidental N+1 query fails loudly instead of silently.
"""

from __future__ import annotations

import enum
import re
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class JobStatus(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED})


class CommandStatus(enum.StrEnum):
    PENDING = "pending"
    APPLIED = "applied"
    REJECTED = "rejected"


LRChangeStatus = CommandStatus  # a learning-rate change is one kind of command


class LRChangeMode(enum.StrEnum):
    SCALE = "scale"
    OVERRIDE = "override"


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    return str(uuid.uuid4())


_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def is_id(value: str) -> bool:
    """Whether ``value`` could be a row id (:func:`new_id`'s form). Checked before a lookup:
    anything else names nothing, and some values (a NUL byte) PostgreSQL refuses."""
    return bool(_ID.match(value))


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite drops the offset)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given; use core.models.utcnow()")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _quoted(values: Any) -> str:
    return ", ".join(f"'{v.value}'" for v in values)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSON()}


class User(Base):
    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    # The database cascades the delete; the ORM must not load tokens to do it.
    tokens: Mapped[list[ApiToken]] = relationship(
        back_populates="user", lazy="raise", passive_deletes=True
    )


class ApiToken(Base):
    """A bearer token; only a keyed hash is stored, the plain token is shown once."""

    __tablename__ = "api_tokens"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    # The first characters let a user tell tokens apart without revealing them.
    prefix: Mapped[str] = mapped_column(String(16))
    label: Mapped[str] = mapped_column(String(128), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(default=None)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)
    # None: never expires (the token `rudder up` prints for its own owner).
    expires_at: Mapped[datetime | None] = mapped_column(default=None)

    user: Mapped[User] = relationship(back_populates="tokens", lazy="raise")


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("owner_id", "idempotency_key"),
        CheckConstraint(f"status IN ({_quoted(JobStatus)})", name="status"),
        Index("ix_jobs_owner_created", "owner_id", "created_at", "id"),
        Index("ix_jobs_owner_status", "owner_id", "status"),
        # The dispatcher's two questions: queued jobs still to send, and queued jobs sent.
        Index("ix_jobs_status_dispatch", "status", "dispatch_pending"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), default=JobStatus.QUEUED.value)
    status_reason: Mapped[str | None] = mapped_column(Text, default=None)
    queue: Mapped[str] = mapped_column(String(16), default="cpu")
    epoch: Mapped[int] = mapped_column(Integer, default=0)
    step: Mapped[int] = mapped_column(BigInteger, default=0)
    current_lr: Mapped[float | None] = mapped_column(Float, default=None)
    latest_metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    idempotency_key: Mapped[str | None] = mapped_column(String(255), default=None)
    # Same key with a different body is a client bug; the hash lets us say so.
    request_hash: Mapped[str | None] = mapped_column(String(64), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    # The transactional outbox (core.dispatch): True while the job is queued and its
    # ``rudder.train`` message has not been handed to the broker yet. Set by the same
    # statement that (re-)queues the job, cleared by the dispatcher once the broker took it.
    dispatch_pending: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=false()
    )
    # When the broker last took the job's message (None: never sent).
    dispatched_at: Mapped[datetime | None] = mapped_column(default=None)
    # Lineage (issue 24): a forked job names its parent and the parent's checkpoint step
    # it started from; ``branch`` counts the rollbacks (each abandons the steps after its
    # checkpoint). ``parameters`` are the model's parameter names as the worker built them
    # ([{name, shape, trainable}]), so the api can check a freeze pattern without the engine.
    # (not a foreign key: a child outlives its deleted parent and keeps the id)
    parent_id: Mapped[str | None] = mapped_column(String(36), default=None, index=True)
    fork_step: Mapped[int | None] = mapped_column(BigInteger, default=None)
    branch: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    parameters: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, default=None)

    owner: Mapped[User] = relationship(lazy="raise")

    @property
    def progress(self) -> dict[str, Any]:
        """How far the job got, as the api shows it (``JobPublic.progress``)."""
        return {"epoch": self.epoch, "step": self.step, "current_lr": self.current_lr,
                "metrics": dict(self.latest_metrics or {})}

    @property
    def epochs_total(self) -> int | None:
        """The spec's ``epochs`` (``JobPublic.epochs_total``: progress as x of total)."""
        epochs = (self.spec or {}).get("epochs")
        return epochs if isinstance(epochs, int) else None


class JobStatusEvent(Base):
    __tablename__ = "job_status_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class MetricPoint(Base):
    """One value of one named metric at one step; unique so a resumed worker can re-send."""

    __tablename__ = "metric_points"
    __table_args__ = (
        UniqueConstraint("job_id", "name", "step"),
        Index("ix_metric_points_job_step", "job_id", "step"),
    )

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(BigInteger)
    epoch: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(128))
    value: Mapped[float] = mapped_column(Float)
    time: Mapped[datetime] = mapped_column(default=utcnow)


class JobCommand(Base):
    """A step-boundary command (core.commands): who asked, what, and how it ended.

    ``kind`` is the command's type and ``params`` its payload; ``source`` is ``user``,
    ``rule`` (``rule`` names it; ``requested_by`` is null) or ``fork``. The worker sets
    ``applied_step`` (the first step that ran with it) and ``result``, or ``reason`` when
    it refused. ``abandoned`` marks a command applied on a branch a rollback discarded:
    it is history, never replayed.
    """

    __tablename__ = "job_commands"
    __table_args__ = (
        CheckConstraint(f"status IN ({_quoted(CommandStatus)})", name="status"),
        Index("ix_job_commands_job_requested", "job_id", "requested_at"),
        Index("ix_job_commands_job_status", "job_id", "status"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(32))
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    source: Mapped[str] = mapped_column(String(16), default="user")
    rule: Mapped[str | None] = mapped_column(String(128), default=None)
    requested_by: Mapped[str | None] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), default=None)
    requested_at: Mapped[datetime] = mapped_column(default=utcnow)
    checkpoint_before: Mapped[bool] = mapped_column(Boolean, default=False,
                                                    server_default=false())
    status: Mapped[str] = mapped_column(String(16), default=CommandStatus.PENDING.value)
    applied_step: Mapped[int | None] = mapped_column(BigInteger, default=None)
    applied_at: Mapped[datetime | None] = mapped_column(default=None)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    reason: Mapped[str | None] = mapped_column(Text, default=None)
    abandoned: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    # A learning-rate change's fields, as the learning-rate endpoints show them.
    @property
    def requested_lr(self) -> float | None:
        value = (self.params or {}).get("learning_rate")
        return float(value) if isinstance(value, int | float) else None

    @property
    def mode(self) -> str:
        return str((self.params or {}).get("mode", LRChangeMode.SCALE.value))

    @property
    def applied_lr(self) -> float | None:
        value = (self.result or {}).get("learning_rate")
        return float(value) if isinstance(value, int | float) else None


class AbandonedMetricPoint(Base):
    """A metric point a rollback left behind: the steps after the checkpoint it rewound
    to, as they were on the branch it abandoned (``branch``: 1 for the first rollback).
    Kept for download and the charts; the live history (metric_points) continues from
    the checkpoint."""

    __tablename__ = "abandoned_metric_points"
    __table_args__ = (Index("ix_abandoned_metric_points_job_branch", "job_id", "branch",
                            "step"),)

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    branch: Mapped[int] = mapped_column(Integer)
    step: Mapped[int] = mapped_column(BigInteger)
    epoch: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(128))
    value: Mapped[float] = mapped_column(Float)
    time: Mapped[datetime] = mapped_column(default=utcnow)


class Checkpoint(Base):
    __tablename__ = "checkpoints"
    __table_args__ = (UniqueConstraint("job_id", "step"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    step: Mapped[int] = mapped_column(BigInteger)
    epoch: Mapped[int] = mapped_column(Integer)
    key_prefix: Mapped[str] = mapped_column(String(512))
    # {"params.npz": {"sha256": "...", "size": 123}, "trainer.npz": {...}, "meta.json": {...}}
    files: Mapped[dict[str, Any]] = mapped_column(JSON)
    size: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Dataset(Base):
    __tablename__ = "datasets"
    __table_args__ = (Index("ix_datasets_owner_created", "owner_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(255))
    format: Mapped[str] = mapped_column(String(8))
    storage_key: Mapped[str] = mapped_column(String(512))
    size: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    num_rows: Mapped[int] = mapped_column(BigInteger)
    feature_shape: Mapped[list[int]] = mapped_column(JSON)
    dtype: Mapped[str] = mapped_column(String(32))
    num_classes: Mapped[int | None] = mapped_column(Integer, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # Chunked uploads are validated by a worker after completion (DatasetStatus); the
    # small single-request upload is validated in the request and born ready.
    status: Mapped[str] = mapped_column(String(16), default="ready", server_default="ready")
    reason: Mapped[str | None] = mapped_column(Text, default=None)
    # Computed at validation: record count, classes, image sizes, per-channel mean/std.
    stats: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    # Every stored object: [{"path": "train.rec", "key": "datasets/<id>/train.rec",
    # "size": n}]; None for single-object data sets (storage_key).
    files: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, default=None)
    # When rudder.validate_dataset was last sent: a set still validating long after is
    # sent again by the worker's sweep (a message lost with Redis, a worker killed).
    validation_sent_at: Mapped[datetime | None] = mapped_column(default=None)
    # When a validation worker took it up: validating without this is still queued.
    validation_started_at: Mapped[datetime | None] = mapped_column(default=None)


class DatasetStatus(enum.StrEnum):
    VALIDATING = "validating"
    READY = "ready"
    INVALID = "invalid"


class UploadStatus(enum.StrEnum):
    OPEN = "open"
    COMPLETING = "completing"
    COMPLETED = "completed"


class DatasetUpload(Base):
    """A resumable chunked upload: files cut into numbered parts, each staged in the
    store as it arrives (core.multipart) and joined into the files on completion."""

    __tablename__ = "dataset_uploads"
    __table_args__ = (Index("ix_dataset_uploads_owner", "owner_id"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(16), default=UploadStatus.OPEN.value)
    part_size: Mapped[int] = mapped_column(BigInteger)
    total_size: Mapped[int] = mapped_column(BigInteger)
    # [{"path", "size", "key", "token", "first_part", "parts"}]: part numbers are global
    # across the files, file i owning first_part .. first_part + parts - 1.
    files: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    dataset_id: Mapped[str | None] = mapped_column(String(36), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class DatasetUploadPart(Base):
    __tablename__ = "dataset_upload_parts"

    upload_id: Mapped[str] = mapped_column(
        ForeignKey("dataset_uploads.id", ondelete="CASCADE"), primary_key=True
    )
    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    # The store's name for the staged send of this part (core.multipart).
    stored_as: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class UploadedModel(Base):
    """A user's MXNet symbol (+ optional params), validated at upload (issue 12).

    The files live in object storage under ``storage_prefix``; the row keeps what the
    upload's inspection found, so listing and job submission never re-read them.
    """

    __tablename__ = "models"
    __table_args__ = (Index("ix_models_owner_created", "owner_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(255))
    storage_prefix: Mapped[str] = mapped_column(String(512))
    symbol_sha256: Mapped[str] = mapped_column(String(64))
    symbol_size: Mapped[int] = mapped_column(BigInteger)
    params_sha256: Mapped[str | None] = mapped_column(String(64), default=None)
    params_size: Mapped[int | None] = mapped_column(BigInteger, default=None)
    input_name: Mapped[str] = mapped_column(String(128))
    input_shape: Mapped[list[int]] = mapped_column(JSON)
    output_shapes: Mapped[list[list[int]]] = mapped_column(JSON)
    # {"Convolution": 20, "BatchNorm": 20, ...}: each operator and how often it occurs
    ops: Mapped[dict[str, int]] = mapped_column(JSON)
    parameter_count: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
