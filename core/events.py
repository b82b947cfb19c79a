"""What the api and the workers say to each other through Redis, as typed models.

Events (a job's ``events`` stream, the SSE ``data:``) and commands (its ``control``
stream) are discriminated unions on ``type``; :class:`core.channel.Channel` is their only
codec, so both processes read and write exactly these shapes.

>>> event = MetricEvent(step=3, epoch=0, epochs_done=0, time=1.5, values={"lr": 0.1})
>>> event.data()
{'step': 3, 'epoch': 0, 'epochs_done': 0, 'time': 1.5, 'values': {'lr': 0.1}}
>>> parse_event("log", {"level": "info", "message": "hi"})
LogEvent(type='log', level='info', message='hi')
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, TypeAdapter

JobStatusName = Literal["queued", "running", "paused", "succeeded", "failed", "cancelled"]
LRMode = Literal["scale", "override"]


class ContractModel(BaseModel):
    """A message between processes: unknown fields are errors, values never change."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def data(self) -> dict[str, Any]:
        """The payload without its ``type`` (the stream keeps the type in its own field)."""
        return self.model_dump(mode="json", exclude={"type"})


# ------------------------------------------------------------------------ events


class MetricEvent(ContractModel):
    """Metric values at a step. ``epoch`` is the 0-based epoch they belong to;
    ``epochs_done`` counts the epochs completed when they were measured."""

    type: Literal["metric"] = "metric"
    step: int
    epoch: int
    epochs_done: int
    time: float
    values: dict[str, float]


class LREvent(ContractModel):
    """The worker's answer to a learning-rate change: applied at a step, or rejected.

    ``learning_rate`` is the lr in effect from ``applied_step`` when applied, the requested
    one when rejected; ``reason`` is null when applied, ``applied_*`` null when rejected.
    """

    type: Literal["lr"] = "lr"
    change_id: str
    status: Literal["applied", "rejected"] = "applied"
    learning_rate: float
    mode: LRMode
    applied_step: int | None = None
    applied_at: float | None = None
    reason: str | None = None


class StatusEvent(ContractModel):
    type: Literal["status"] = "status"
    status: JobStatusName
    reason: str | None = None
    step: int | None = None  # where the job stood (set when a run ends)
    command_id: str | None = None  # the pause/cancel command that ended the run

    def data(self) -> dict[str, Any]:
        # design.md's shape is {status, reason?}: the optional keys appear only when set.
        return self.model_dump(mode="json", exclude={"type"}, exclude_none=True)


class CheckpointEvent(ContractModel):
    type: Literal["checkpoint"] = "checkpoint"
    step: int
    epoch: int
    sha256: str
    size: int


class LogEvent(ContractModel):
    type: Literal["log"] = "log"
    level: str
    message: str


JobEvent = Annotated[
    MetricEvent | LREvent | StatusEvent | CheckpointEvent | LogEvent,
    Field(discriminator="type"),
]
EVENT_TYPES = frozenset({"metric", "lr", "status", "checkpoint", "log"})
_EVENTS: TypeAdapter[JobEvent] = TypeAdapter(JobEvent)


def parse_event(event_type: str, data: dict[str, Any]) -> JobEvent:
    """An event from its stream fields (raises pydantic.ValidationError if malformed)."""
    return _EVENTS.validate_python({**data, "type": event_type})


# ------------------------------------------------------------------------ workers


class GpuUsage(ContractModel):
    name: str
    utilization_percent: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None


class WorkerHeartbeat(ContractModel):
    """What a worker process says about itself every few seconds (the System view).

    ``cpu_percent`` is the whole machine's CPU use since the previous heartbeat (null on
    the first); memory is the machine's; ``current_job_id`` is null while idle.
    """

    type: Literal["heartbeat"] = "heartbeat"
    worker_id: str
    hostname: str
    queues: list[str]
    current_job_id: str | None = None
    cpu_percent: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    gpus: list[GpuUsage] = Field(default_factory=list)
    time: float


# ------------------------------------------------------------------------ commands


def _new_command_id() -> str:
    return str(uuid.uuid4())


class SetLRCommand(ContractModel):
    """Change the learning rate; ``command_id`` is the change's id (its DB row)."""

    type: Literal["set_lr"] = "set_lr"
    command_id: str = Field(default_factory=_new_command_id)
    learning_rate: StrictFloat = Field(gt=0, allow_inf_nan=False)  # JSON true is not 1.0
    mode: LRMode = "scale"
    requested_by: str | None = None


class PauseCommand(ContractModel):
    type: Literal["pause"] = "pause"
    command_id: str = Field(default_factory=_new_command_id)
    requested_by: str | None = None


class CancelCommand(ContractModel):
    type: Literal["cancel"] = "cancel"
    command_id: str = Field(default_factory=_new_command_id)
    requested_by: str | None = None


Command = Annotated[SetLRCommand | PauseCommand | CancelCommand, Field(discriminator="type")]
COMMAND_TYPES = frozenset({"set_lr", "pause", "cancel"})
_COMMANDS: TypeAdapter[Command] = TypeAdapter(Command)


def parse_command(command_type: str, command_id: str, data: dict[str, Any]) -> Command:
    """A command from its stream fields (raises pydantic.ValidationError if malformed)."""
    return _COMMANDS.validate_python({**data, "type": command_type, "command_id": command_id})
