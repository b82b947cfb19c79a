"""Step-boundary commands over HTTP: the request bodies (core.commands' models) and rows."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Discriminator, Field, Tag

from api.schemas.base import PublicModel
from core.commands import (
    CheckpointCommand,
    EvaluateCommand,
    FreezeCommand,
    RollbackCommand,
    SetHyperparametersCommand,
    SetLRCommand,
    SetRulesCommand,
    SetScheduleCommand,
    UnfreezeCommand,
)

# What a user may send to POST /v1/jobs/{id}/commands (pause and cancel have their own
# endpoints; ``stop`` is a rule's). Tags are capitalised: api.errors leaves them out of a
# field's name, so an error names ``momentum``, not ``set_hyperparameters.momentum``.
_TAGS = {
    "set_lr": "SetLR", "set_hyperparameters": "SetHyperparameters",
    "set_schedule": "SetSchedule", "freeze": "Freeze", "unfreeze": "Unfreeze",
    "evaluate": "Evaluate", "checkpoint": "Checkpoint", "set_rules": "SetRules",
    "rollback": "Rollback",
}


def _command_tag(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return _TAGS.get(kind) if isinstance(kind, str) else None


CommandRequest = Annotated[
    Annotated[SetLRCommand, Tag("SetLR")]
    | Annotated[SetHyperparametersCommand, Tag("SetHyperparameters")]
    | Annotated[SetScheduleCommand, Tag("SetSchedule")]
    | Annotated[FreezeCommand, Tag("Freeze")]
    | Annotated[UnfreezeCommand, Tag("Unfreeze")]
    | Annotated[EvaluateCommand, Tag("Evaluate")]
    | Annotated[CheckpointCommand, Tag("Checkpoint")]
    | Annotated[SetRulesCommand, Tag("SetRules")]
    | Annotated[RollbackCommand, Tag("Rollback")],
    Discriminator(
        _command_tag, custom_error_type="command_type",
        custom_error_message="type must be one of " + ", ".join(_TAGS),
    ),
]


class CommandAccepted(BaseModel):
    """A command recorded and sent: the worker applies it at its next step boundary
    (``GET /v1/jobs/{id}/commands/{command_id}`` or the events stream confirm it)."""

    job_id: str
    command_id: str
    kind: str
    status: Literal["pending", "applied", "rejected"]
    applied_step: int | None = None


class CommandPublic(PublicModel):
    command_id: str = Field(validation_alias="id")
    kind: str
    params: dict[str, Any]
    status: str
    source: str = Field(description="user, rule (see ``rule``) or fork")
    by: str = Field(description="who asked, as the timeline shows it: the user's name, "
                    "rule <name>, or fork")
    requested_by: str | None
    rule: str | None
    requested_at: datetime
    checkpoint_before: bool
    applied_step: int | None = Field(description="the first step that ran with it")
    applied_at: datetime | None
    result: dict[str, Any] | None
    reason: str | None = Field(description="why it was rejected")
    abandoned: bool = Field(description="applied on a branch a rollback discarded")


class CommandsPublic(BaseModel):
    job_id: str
    data: list[CommandPublic]


class HyperparametersPublic(BaseModel):
    """What the job trains with now, and every change with its step."""

    job_id: str
    optimizer: str
    learning_rate: float | None = Field(description="the lr in effect (last reported)")
    values: dict[str, Any] = Field(description="the optimizer's live hyperparameters")
    schedule: dict[str, Any] | None = Field(description="type, params and from_step of the "
                                            "schedule in effect (null: a constant lr)")
    frozen: list[str] = Field(description="parameters not updated (grad_req='null')")
    rules: list[dict[str, Any]]
    changes: list[CommandPublic]
