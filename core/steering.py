"""What the api checks before it accepts a step-boundary command, and what is in effect.

Each kind of :mod:`core.commands` has one validator here, run against the job as the api
knows it (:class:`JobContext`: its spec, status, checkpoints and the parameter names its
worker published). A refusal names the field (:class:`CommandRefused`); the worker can
still refuse what only the engine knows (a schedule whose parameters it rejects), with
the reason, at the step.

:func:`hyperparameters_in_effect` folds the applied commands over the spec: the values,
schedule, frozen parameters and rules a job trains with now.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from core import spec_params
from core.commands import (
    LIVE_HYPERPARAMETERS,
    CancelCommand,
    CheckpointCommand,
    Command,
    EvaluateCommand,
    FreezeCommand,
    PauseCommand,
    RollbackCommand,
    SetHyperparametersCommand,
    SetLRCommand,
    SetRulesCommand,
    SetScheduleCommand,
    StepCommand,
    StopCommand,
    UnfreezeCommand,
    parse_command,
)
from core.commands import CommandOutcome as CommandOutcome
from core.events import CommandEvent, JobEvent, LREvent
from core.jobspec import JobSpec
from core.param_patterns import PatternError, matching
from core.rules import dump_rules


class CommandRefused(Exception):
    """A command the job cannot take: ``field`` names what is wrong; ``status`` is 422
    for a bad value, 409 for one the job's state refuses."""

    def __init__(self, field_name: str, message: str, status: int = 422) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message
        self.status = status


@dataclass(frozen=True)
class JobContext:
    """The job as the api knows it when a command arrives."""

    spec: JobSpec
    status: str
    lr_bounds: tuple[float, float]
    # [{name, shape, trainable}] as the worker built the model (None: not started yet)
    parameters: list[dict[str, Any]] | None = None
    checkpoint_steps: tuple[int, ...] = ()
    frozen: tuple[str, ...] = field(default=())

    def trainable_names(self) -> list[str]:
        return [str(p["name"]) for p in self.parameters or [] if p.get("trainable", True)]


Validator = Callable[[Any, JobContext], None]
VALIDATORS: dict[str, Validator] = {}


def validates(kind: str) -> Callable[[Validator], Validator]:
    def register(function: Validator) -> Validator:
        VALIDATORS[kind] = function
        return function
    return register


def validate(command: StepCommand, context: JobContext) -> None:
    """Raise :class:`CommandRefused` unless the job can take ``command``."""
    VALIDATORS[command.type](command, context)


def _check_lr(value: float, name: str, context: JobContext) -> None:
    low, high = context.lr_bounds
    if not low <= value <= high:
        raise CommandRefused(name, f"must be between {low:g} and {high:g}")


@validates("set_lr")
def _set_lr(command: SetLRCommand, context: JobContext) -> None:
    _check_lr(command.learning_rate, "learning_rate", context)


def optimizer_value(spec: JobSpec, name: str) -> Any:
    """The spec's value of an optimizer parameter, or the optimizer's default."""
    table = spec_params.parameters("optimizer", spec.optimizer.type)
    return spec.optimizer.params.get(name, table.get(name, {}).get("default"))


@validates("set_hyperparameters")
def _set_hyperparameters(command: SetHyperparametersCommand, context: JobContext) -> None:
    values = command.values()
    optimizer = context.spec.optimizer.type
    table = spec_params.parameters("optimizer", optimizer)
    live = [name for name in LIVE_HYPERPARAMETERS if name in table]
    if not values:
        raise CommandRefused("body", f"give at least one of {', '.join(live)}")
    if "rescale_grad" in values:
        raise CommandRefused("rescale_grad", "the trainer sets it at every step (1 / batch "
                             "size); fork the job with another data.batch_size instead")
    for name, value in values.items():
        if name not in table:
            raise CommandRefused(name, f"{optimizer} has no parameter {name}; the ones it "
                                 f"can change while it runs: {', '.join(live)}")
        if name == "clip_gradient" and value == 0:
            continue  # 0 turns clipping off (MXNet: clip_gradient <= 0 means none)
        try:
            spec_params.check_value("optimizer", name, table[name], value)
        except ValueError as exc:
            raise CommandRefused(name, str(exc).removeprefix(f"{name} ")) from None
    if "momentum" in values and optimizer_value(context.spec, "momentum") == 0:
        raise CommandRefused("momentum", f"this job's {optimizer} was created with momentum "
                             "0, so it keeps no momentum state to change; fork it with "
                             "optimizer.momentum > 0 instead")


@validates("set_schedule")
def _set_schedule(command: SetScheduleCommand, context: JobContext) -> None:
    if command.learning_rate is not None:
        _check_lr(command.learning_rate, "learning_rate", context)
    base_lr = command.lr_scheduler.params.get("base_lr")
    if isinstance(base_lr, int | float):
        _check_lr(float(base_lr), "lr_scheduler.base_lr", context)


def _pattern_matches(pattern: str, context: JobContext, names: list[str]) -> list[str]:
    if context.parameters is None:
        raise CommandRefused("pattern", "the job's parameter names are known once its first "
                             "run has built the model; retry when it is running", status=409)
    try:
        return matching(pattern, names)
    except PatternError as exc:
        raise CommandRefused("pattern", str(exc)) from None


@validates("freeze")
def _freeze(command: FreezeCommand, context: JobContext) -> None:
    names = context.trainable_names()
    if not _pattern_matches(command.pattern, context, names):
        raise CommandRefused("pattern", f"matches no trainable parameter of this job (a "
                             f"regular expression matched at the start of names such as "
                             f"{', '.join(names[:4])}{', ...' if len(names) > 4 else ''})")


@validates("unfreeze")
def _unfreeze(command: UnfreezeCommand, context: JobContext) -> None:
    if not _pattern_matches(command.pattern, context, context.trainable_names()):
        raise CommandRefused("pattern", "matches no trainable parameter of this job")
    if context.frozen and not matching(command.pattern, list(context.frozen)):
        raise CommandRefused("pattern", "matches none of the frozen parameters ("
                             f"{', '.join(context.frozen[:4])}"
                             f"{', ...' if len(context.frozen) > 4 else ''})")


@validates("evaluate")
def _evaluate(command: EvaluateCommand, context: JobContext) -> None:
    if context.spec.data.val is None:
        raise CommandRefused("type", "the job has no validation data (data.val) to evaluate")


@validates("checkpoint")
def _checkpoint(command: CheckpointCommand, context: JobContext) -> None:
    return None


@validates("set_rules")
def _set_rules(command: SetRulesCommand, context: JobContext) -> None:
    for index, rule in enumerate(command.rules):
        if rule.metric.startswith("val_") and context.spec.data.val is None:
            raise CommandRefused(f"rules.{index}.metric", f"{rule.metric} needs validation "
                                 "data (data.val), which this job has not")


@validates("rollback")
def _rollback(command: RollbackCommand, context: JobContext) -> None:
    if context.status not in ("running", "paused"):
        raise CommandRefused("status", f"only a running or paused job rolls back; this one "
                             f"is {context.status}", status=409)
    if command.step not in context.checkpoint_steps:
        kept = ", ".join(str(s) for s in context.checkpoint_steps) or "none yet"
        raise CommandRefused("step", f"the job has no checkpoint at step {command.step} "
                             f"(kept: {kept})")


@validates("pause")
def _pause(command: PauseCommand, context: JobContext) -> None:
    return None  # the pause endpoint decides from the job's status


@validates("cancel")
def _cancel(command: CancelCommand, context: JobContext) -> None:
    return None


@validates("stop")
def _stop(command: StopCommand, context: JobContext) -> None:
    if command.source != "rule":
        raise CommandRefused("type", "stop is issued by rules (early_stop); use cancel")


# ---------------------------------------------------------------- rows and what is in effect


def command_of(kind: str, command_id: str, params: dict[str, Any], *,
               requested_by: str | None, source: str, rule: str | None,
               checkpoint_before: bool) -> Command:
    """The typed command a stored row describes."""
    return parse_command(kind, command_id, {
        **params, "requested_by": requested_by, "source": source, "rule": rule,
        "checkpoint_before": checkpoint_before})


@dataclass(frozen=True)
class AppliedCommand:
    """An applied command, with the step it took effect from (oldest first)."""

    step: int
    command: Command


def hyperparameters_in_effect(spec: JobSpec, applied: Iterable[AppliedCommand],
                              parameter_names: list[str] | None) -> dict[str, Any]:
    """What a job trains with after ``applied``: the optimizer's live values, the
    schedule (the spec's, or the one a set_schedule put in from its step), the frozen
    parameters and the rules."""
    table = spec_params.parameters("optimizer", spec.optimizer.type)
    values = {name: optimizer_value(spec, name) for name in LIVE_HYPERPARAMETERS
              if name in table}
    schedule: dict[str, Any] | None = (
        None if spec.lr_scheduler is None else
        {"type": spec.lr_scheduler.type, "params": spec.lr_scheduler.params, "from_step": 1})
    frozen: list[str] = []
    rules = dump_rules(spec.rules)
    for item in sorted(applied, key=lambda a: a.step):
        command = item.command
        if isinstance(command, SetHyperparametersCommand):
            values.update(command.values())
        elif isinstance(command, SetScheduleCommand):
            params = dict(command.lr_scheduler.params)
            if command.learning_rate is not None:
                params["base_lr"] = command.learning_rate
            schedule = {"type": command.lr_scheduler.type, "params": params,
                        "from_step": item.step}
        elif isinstance(command, SetLRCommand) and command.mode == "override":
            schedule = None
        elif isinstance(command, FreezeCommand | UnfreezeCommand):
            chosen = set(matching(command.pattern, parameter_names or []))
            frozen = ([n for n in frozen if n not in chosen] if command.type == "unfreeze"
                      else sorted(set(frozen) | chosen))
        elif isinstance(command, SetRulesCommand):
            rules = dump_rules(command.rules)
    return {"optimizer": spec.optimizer.type, "values": values, "schedule": schedule,
            "frozen": frozen, "rules": rules}


def command_of_row(row: Any) -> Command:
    """The typed command of a :class:`core.models.JobCommand` row."""
    return command_of(row.kind, row.id, dict(row.params or {}), requested_by=row.requested_by,
                      source=row.source, rule=row.rule,
                      checkpoint_before=bool(row.checkpoint_before))


def outcome_event(outcome: CommandOutcome) -> JobEvent:
    """The live stream's answer to a command: an ``lr`` event for ``set_lr`` (what the
    learning-rate clients have always read), a ``command`` event for every other kind."""
    command = outcome.command
    if isinstance(command, SetLRCommand):
        applied = outcome.status == "applied"
        rate = outcome.result.get("learning_rate", command.learning_rate)
        return LREvent(change_id=command.command_id, status=outcome.status,
                       learning_rate=float(rate), mode=command.mode,
                       applied_step=outcome.step if applied else None,
                       applied_at=outcome.at if applied else None,
                       reason=None if applied else outcome.reason)
    return CommandEvent(command_id=command.command_id, kind=command.type,
                        status=outcome.status, step=outcome.step, at=outcome.at,
                        by=command.by, result=outcome.result, reason=outcome.reason)
