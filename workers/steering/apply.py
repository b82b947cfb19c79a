"""(b) Applying a list of commands to the trainer state at a step boundary.

:func:`apply_commands` takes the commands (a), decided, in order, and changes the trainer,
the network's parameters and the :class:`~workers.steering.state.SteeringState`; it
returns one :class:`~core.commands.CommandOutcome` per command it carried out or refused
and the actions left for the loop (evaluate now, checkpoint now, end the run). Nothing
here reads or writes Redis, the database or object storage, and the same list applied to
the same state gives the same state: every rank of a distributed job can run it on the
list rank 0 decided.

One apply function per kind (``APPLY``); tests/core/test_steering.py checks every kind of
core.commands has one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import engine.lr_scheduler
from core.commands import (
    RUN_ENDING,
    Command,
    CommandOutcome,
    FreezeCommand,
    SetHyperparametersCommand,
    SetLRCommand,
    SetRulesCommand,
    SetScheduleCommand,
    UnfreezeCommand,
)
from core.param_patterns import PatternError, matching
from workers.steering import schedule
from workers.steering.rules import RuleBook
from workers.steering.schedule import ShiftedSchedule
from workers.steering.state import SteeringState


class Refused(Exception):
    """The command cannot be applied to this trainer (the message says why)."""


@dataclass
class Target:
    """What commands change: the trainer (its optimizer), the network's parameters by
    name, the steering state and the rules."""

    trainer: Any
    params: dict[str, Any]
    state: SteeringState
    rules: RuleBook


@dataclass
class Applied:
    """What one boundary's commands came to.

    ``outcomes``: the confirmations of what was applied or refused; ``evaluate`` /
    ``checkpoint``: commands the loop carries out next (it confirms them); ``ending``: the
    run-ending command (pause, cancel, stop, rollback) the loop stops for, confirmed with
    the step the run ends at; ``left``: the commands after it, not applied (still pending:
    the next run applies them)."""

    outcomes: list[CommandOutcome] = field(default_factory=list)
    evaluate: list[Command] = field(default_factory=list)
    checkpoint: list[Command] = field(default_factory=list)
    ending: Command | None = None
    left: list[Command] = field(default_factory=list)


ApplyFunction = Callable[[Any, Target, int], dict[str, Any]]
APPLY: dict[str, ApplyFunction | None] = {}  # None: an action the loop carries out


def applies(kind: str) -> Callable[[ApplyFunction], ApplyFunction]:
    def register(function: ApplyFunction) -> ApplyFunction:
        APPLY[kind] = function
        return function
    return register


# What the loop carries out at the boundary itself, in the order sent (not the trainer)
ACTIONS = ("evaluate", "checkpoint")
for _action in (*ACTIONS, *RUN_ENDING):
    APPLY[_action] = None


def apply_commands(target: Target, commands: list[Command], step: int) -> Applied:
    """Apply ``commands`` after ``step`` updates (they take effect from ``step + 1``)."""
    applied = Applied()
    for index, command in enumerate(commands):
        if command.type in RUN_ENDING:
            # Applied at the step the run stops at. A rollback is confirmed by the rewind
            # that carries it out (it may still fail there).
            applied.ending = command
            applied.left = list(commands[index + 1:])
            target.state.applied.append(command.command_id)
            if command.type != "rollback":
                applied.outcomes.append(_outcome(command, "applied", step))
            break
        function = APPLY[command.type]
        if function is None:  # carried out by the loop right after this, at this step
            target.state.applied.append(command.command_id)
            (applied.evaluate if command.type == "evaluate" else applied.checkpoint).append(
                command)
            continue
        try:
            result = function(command, target, step)
        except Refused as refused:
            applied.outcomes.append(_outcome(command, "rejected", None, reason=str(refused)))
            continue
        target.state.applied.append(command.command_id)
        applied.outcomes.append(_outcome(command, "applied", step + 1, result))
    return applied


def _outcome(command: Command, status: str, step: int | None,
             result: dict[str, Any] | None = None, reason: str | None = None
             ) -> CommandOutcome:
    return CommandOutcome(command=command, status=status,  # type: ignore[arg-type]
                          step=step, at=time.time(), result=result or {}, reason=reason)


# ---------------------------------------------------------------- one function per kind


@applies("set_lr")
def _set_lr(command: SetLRCommand, target: Target, step: int) -> dict[str, Any]:
    trainer = target.trainer
    try:
        trainer.set_learning_rate(command.learning_rate, mode=command.mode)
    except (ValueError, TypeError, UserWarning) as exc:
        raise Refused(str(exc)) from None
    return {"learning_rate": float(trainer.learning_rate)}


@applies("set_hyperparameters")
def _set_hyperparameters(command: SetHyperparametersCommand, target: Target, step: int
                         ) -> dict[str, Any]:
    optimizer = target.trainer.optimizer
    values = command.values()
    for name in values:
        if name == "rescale_grad":
            raise Refused("rescale_grad is set by the trainer at every step")
        if not hasattr(optimizer, name):
            raise Refused(f"{type(optimizer).__name__} has no parameter {name}")
    if "momentum" in values and not getattr(optimizer, "momentum", 0):
        raise Refused("the optimizer was created with momentum 0 and keeps no momentum state")
    for name, value in values.items():
        # clip_gradient 0 is "no clipping" (MXNet); the engine reads None the same way.
        setattr(optimizer, name, None if name == "clip_gradient" and value == 0 else value)
    return dict(values)


@applies("set_schedule")
def _set_schedule(command: SetScheduleCommand, target: Target, step: int) -> dict[str, Any]:
    trainer = target.trainer
    params = dict(command.lr_scheduler.engine_kwargs())
    base_lr = command.learning_rate or params.get("base_lr") or float(trainer.learning_rate)
    params["base_lr"] = float(base_lr)  # type: ignore[arg-type]
    try:
        inner = engine.lr_scheduler.create(command.lr_scheduler.type, **params)
    except (KeyError, ValueError, TypeError, AssertionError) as exc:
        raise Refused(f"lr_scheduler: {exc}") from None
    offset = int(trainer.optimizer.num_update)
    trainer.optimizer.replace_lr_scheduler(ShiftedSchedule(inner, offset))
    target.state.schedule = {"type": command.lr_scheduler.type, "params": params,
                             "offset": offset}
    return {"learning_rate": float(trainer.learning_rate), "base_lr": params["base_lr"],
            "from_step": step + 1}


def _names(pattern: str, names: list[str]) -> list[str]:
    try:
        return matching(pattern, names)
    except PatternError as exc:
        raise Refused(f"pattern {exc}") from None


@applies("freeze")
def _freeze(command: FreezeCommand, target: Target, step: int) -> dict[str, Any]:
    trainable = [n for n, p in target.params.items() if p.grad_req != "null"]
    chosen = _names(command.pattern, trainable)
    if not chosen:
        raise Refused(f"pattern {command.pattern!r} matches no trainable parameter")
    for name in chosen:
        parameter = target.params[name]
        target.state.frozen[name] = parameter.grad_req
        parameter.grad_req = "null"
    return {"frozen": chosen}


@applies("unfreeze")
def _unfreeze(command: UnfreezeCommand, target: Target, step: int) -> dict[str, Any]:
    chosen = _names(command.pattern, list(target.state.frozen))
    if not chosen:
        raise Refused(f"pattern {command.pattern!r} matches no frozen parameter")
    for name in chosen:
        target.params[name].grad_req = target.state.frozen.pop(name)
    return {"unfrozen": chosen}


@applies("set_rules")
def _set_rules(command: SetRulesCommand, target: Target, step: int) -> dict[str, Any]:
    target.rules.replace(list(command.rules))
    target.state.rules = target.rules.dump()
    return {"rules": [rule.rule_name for rule in command.rules]}


def restore(target: Target, state: SteeringState) -> None:
    """Put back what a checkpoint's steering state says, before the trainer's own state
    is loaded (a replaced schedule must be in place for its saved state to load)."""
    target.state.applied = list(state.applied)
    for name, req in state.frozen.items():
        if name in target.params:
            target.state.frozen[name] = req
            target.params[name].grad_req = "null"
    if state.schedule is not None:
        target.trainer.optimizer.replace_lr_scheduler(schedule.build(state.schedule))
        target.state.schedule = dict(state.schedule)
    target.rules.restore(state.rules, state.rule_states)
    target.state.rules = state.rules
