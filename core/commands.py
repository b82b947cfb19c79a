"""Step-boundary commands: every way a running job is steered, as one typed protocol.

A command is validated and recorded by the api (or issued by a rule in the worker), sent
on the job's control stream, applied by the worker at its next step boundary, and answered
by a :class:`CommandOutcome` naming the step (or the reason it was refused). Each kind is
one model here, one validator in :mod:`core.steering` and one apply function in
:mod:`workers.steering.apply`; tests/core/test_steering.py fails when a kind lacks either.

Every command carries the same envelope: ``command_id`` (its DB row's id), who asked
(``requested_by``: a user id; ``source``: ``user``, ``rule`` (with ``rule``: its name) or
``fork`` (the overrides of a forked job)) and ``checkpoint_before`` (take a checkpoint at
the step before it applies, so it can be rolled back exactly).

>>> command = parse_command("set_hyperparameters", "c1", {"wd": 0.0001})
>>> command.values()
{'wd': 0.0001}
>>> sorted(command.targets())
['wd']
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, TypeAdapter

from core.jobspec import SchedulerSpec
from core.rules import Rule

LRMode = Literal["scale", "override"]
Source = Literal["user", "rule", "fork"]
# The optimizer attributes a command may change while the job runs. ``rescale_grad`` is a
# parameter too, but the trainer sets it at every step (1 / batch size).
LIVE_HYPERPARAMETERS = ("wd", "momentum", "beta1", "beta2", "epsilon", "clip_gradient")
ENVELOPE_FIELDS = frozenset({"command_id", "requested_by", "source", "rule"})
Number = StrictFloat  # JSON 1 is accepted as 1.0; true and "0.1" are refused


def _new_command_id() -> str:
    return str(uuid.uuid4())


class StepCommand(BaseModel):
    """The envelope every command shares (see the module's docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str
    command_id: str = Field(default_factory=_new_command_id)
    requested_by: str | None = None
    source: Source = "user"
    rule: str | None = None
    checkpoint_before: bool = False

    def payload(self) -> dict[str, Any]:
        """What was asked, without the envelope (the DB row's ``params``)."""
        return self.model_dump(mode="json", exclude={"type", "checkpoint_before",
                                                     *ENVELOPE_FIELDS})

    def targets(self) -> frozenset[str]:
        """What the command changes; a rule's command that changes what a user's command
        changed at the same step is refused (the user's wins)."""
        return frozenset()

    @property
    def by(self) -> str:
        """Who asked, as the audit trail shows it."""
        if self.source == "rule":
            return f"rule {self.rule}"
        if self.source == "fork":
            return "fork"
        return f"user {self.requested_by}" if self.requested_by else "user"


class SetLRCommand(StepCommand):
    """Change the learning rate: ``scale`` the running schedule so its value now becomes
    ``learning_rate``, or ``override`` it with that constant."""

    type: Literal["set_lr"] = "set_lr"
    learning_rate: Number = Field(gt=0, allow_inf_nan=False)
    mode: LRMode = "scale"

    def targets(self) -> frozenset[str]:
        return frozenset({"learning_rate"})


class SetHyperparametersCommand(StepCommand):
    """Set optimizer hyperparameters; only the fields given change (``clip_gradient: 0``
    turns clipping off, as in MXNet). Each must be one of the job's optimizer's
    parameters."""

    type: Literal["set_hyperparameters"] = "set_hyperparameters"
    wd: Number | None = Field(default=None, allow_inf_nan=False)
    momentum: Number | None = Field(default=None, allow_inf_nan=False)
    beta1: Number | None = Field(default=None, allow_inf_nan=False)
    beta2: Number | None = Field(default=None, allow_inf_nan=False)
    epsilon: Number | None = Field(default=None, allow_inf_nan=False)
    clip_gradient: Number | None = Field(default=None, allow_inf_nan=False)
    rescale_grad: Number | None = Field(default=None, allow_inf_nan=False,
                                        description="refused: the trainer sets it")

    def values(self) -> dict[str, float]:
        """The fields given, in a fixed order (null ones are not changes)."""
        return {name: float(value) for name in (*LIVE_HYPERPARAMETERS, "rescale_grad")
                if (value := getattr(self, name)) is not None}

    def payload(self) -> dict[str, Any]:
        return dict(self.values())

    def targets(self) -> frozenset[str]:
        return frozenset(self.values())


class SetScheduleCommand(StepCommand):
    """Replace the learning-rate schedule from the next step: the new schedule's step 1 is
    the job's next step. Its ``base_lr`` is ``learning_rate`` if given, else the
    scheduler's own ``base_lr``, else the learning rate in effect."""

    type: Literal["set_schedule"] = "set_schedule"
    lr_scheduler: SchedulerSpec
    learning_rate: Number | None = Field(default=None, gt=0, allow_inf_nan=False)

    def targets(self) -> frozenset[str]:
        return frozenset({"learning_rate"})


class FreezeCommand(StepCommand):
    """Stop updating the parameters whose names match ``pattern`` (a regular expression
    matched at the start of the name, as ``collect_params(select)``): grad_req='null'."""

    type: Literal["freeze"] = "freeze"
    pattern: str = Field(min_length=1, max_length=256)

    def targets(self) -> frozenset[str]:
        return frozenset({"frozen"})


class UnfreezeCommand(StepCommand):
    """Update again the frozen parameters whose names match ``pattern``."""

    type: Literal["unfreeze"] = "unfreeze"
    pattern: str = Field(min_length=1, max_length=256)

    def targets(self) -> frozenset[str]:
        return frozenset({"frozen"})


class EvaluateCommand(StepCommand):
    """Run a validation pass now (metric points ``val_*`` at this step; rules look)."""

    type: Literal["evaluate"] = "evaluate"


class CheckpointCommand(StepCommand):
    """Take a checkpoint now (outside ``checkpoint.every_steps``)."""

    type: Literal["checkpoint"] = "checkpoint"


class SetRulesCommand(StepCommand):
    """Replace the job's rules (a rule keeps its counters if its settings are unchanged)."""

    type: Literal["set_rules"] = "set_rules"
    rules: list[Rule] = Field(default_factory=list)

    def targets(self) -> frozenset[str]:
        return frozenset({"rules"})


class RollbackCommand(StepCommand):
    """Rewind the job to its checkpoint at ``step``: later metric points are kept as an
    abandoned branch, and training continues from that checkpoint."""

    type: Literal["rollback"] = "rollback"
    step: int = Field(ge=0, le=2**62)

    def targets(self) -> frozenset[str]:
        return frozenset({"run"})


class PauseCommand(StepCommand):
    type: Literal["pause"] = "pause"
    reason: str | None = Field(default=None, max_length=512)

    def targets(self) -> frozenset[str]:
        return frozenset({"run"})


class CancelCommand(StepCommand):
    type: Literal["cancel"] = "cancel"
    # who cancelled, in the words the job's status shows ("cancelled by alice")
    reason: str | None = Field(default=None, max_length=512)

    def targets(self) -> frozenset[str]:
        return frozenset({"run"})


class StopCommand(StepCommand):
    """End the job now as succeeded (a rule's early stop): a final checkpoint and export."""

    type: Literal["stop"] = "stop"
    reason: str | None = Field(default=None, max_length=512)

    def targets(self) -> frozenset[str]:
        return frozenset({"run"})


Command = Annotated[
    SetLRCommand | SetHyperparametersCommand | SetScheduleCommand | FreezeCommand
    | UnfreezeCommand | EvaluateCommand | CheckpointCommand | SetRulesCommand
    | RollbackCommand | PauseCommand | CancelCommand | StopCommand,
    Field(discriminator="type"),
]
COMMAND_TYPES = frozenset({
    "set_lr", "set_hyperparameters", "set_schedule", "freeze", "unfreeze", "evaluate",
    "checkpoint", "set_rules", "rollback", "pause", "cancel", "stop",
})
# Kinds that end the run they are applied in: the boundary applies nothing after them
# (later commands stay pending for the next run), and a resume never replays them.
RUN_ENDING = frozenset({"rollback", "pause", "cancel", "stop"})
# Kinds whose effect is in the trainer state: re-applied at their step when a run resumes
# from a checkpoint taken before them. (A checkpoint has nothing to re-apply; the others
# end a run.)
REPLAYED = frozenset({"set_lr", "set_hyperparameters", "set_schedule", "freeze", "unfreeze",
                      "evaluate", "set_rules"})
_COMMANDS: TypeAdapter[Command] = TypeAdapter(Command)


def parse_command(command_type: str, command_id: str, data: dict[str, Any]) -> Command:
    """A command from its stream fields (raises pydantic.ValidationError if malformed)."""
    return _COMMANDS.validate_python({**data, "type": command_type, "command_id": command_id})


def command_fields(command: StepCommand) -> dict[str, Any]:
    """Everything but ``type`` and ``command_id`` (the stream keeps those in own fields)."""
    return command.model_dump(mode="json", exclude={"type", "command_id"})


class CommandOutcome(BaseModel):
    """The worker's answer to one command: applied at ``step`` (the first step that runs
    with it) or rejected with ``reason``. ``result`` says what took effect (the learning
    rate in effect, the parameters frozen, the checkpoint's step, ...). It carries the
    command itself, so a rule's command, which no api recorded, is stored from it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: Command
    status: Literal["applied", "rejected"]
    step: int | None = None
    at: float | None = None
    result: dict[str, Any] = Field(default_factory=dict)
    reason: str | None = None
