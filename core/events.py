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

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

# The commands live in core.commands (one module per concept); these names stay importable
# from here, where the api and the workers have always found them.
from core.commands import COMMAND_TYPES as COMMAND_TYPES
from core.commands import CancelCommand as CancelCommand
from core.commands import Command as Command
from core.commands import LRMode as LRMode
from core.commands import PauseCommand as PauseCommand
from core.commands import SetLRCommand as SetLRCommand
from core.commands import parse_command as parse_command

JobStatusName = Literal["queued", "running", "paused", "succeeded", "failed", "cancelled"]


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


class CommandEvent(ContractModel):
    """The worker's answer to a step-boundary command other than ``set_lr`` (whose answer
    is an :class:`LREvent`): applied from ``step``, or rejected with ``reason``.
    ``by`` is ``user <id>``, ``rule <name>`` or ``fork``; ``result`` what took effect."""

    type: Literal["command"] = "command"
    command_id: str
    kind: str
    status: Literal["applied", "rejected"]
    step: int | None = None
    at: float | None = None
    by: str
    result: dict[str, Any] = Field(default_factory=dict)
    reason: str | None = None


JobEvent = Annotated[
    MetricEvent | LREvent | StatusEvent | CheckpointEvent | LogEvent | CommandEvent,
    Field(discriminator="type"),
]
EVENT_TYPES = frozenset({"metric", "lr", "status", "checkpoint", "log", "command"})
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
    # In a job on several workers: this worker's rank, of ``ranks`` (null otherwise).
    rank: int | None = None
    ranks: int | None = None
    cpu_percent: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    gpus: list[GpuUsage] = Field(default_factory=list)
    time: float


