"""The job's rules (core.rules) as the worker runs them: counters in, commands out.

:meth:`RuleBook.observe` is called with the metric values at the end of each validation
(and, for a guard with ``every_steps``, with the running training values every that many
steps). A rule that fires returns a command like a user's, ``source: rule``, whose id is
derived from (job, branch, rule, step): a resumed run that re-trains the same steps fires
the same rule at the same step with the same id, and the record stays one row.

The counters are plain JSON (saved in the checkpoint), and the decisions depend only on
the values observed, so a run resumed from a checkpoint decides exactly as the first did.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from typing import Any

from core.commands import Command, PauseCommand, SetLRCommand, StopCommand
from core.rules import EarlyStop, Guard, ReduceOnPlateau, Rule, dump_rules, parse_rules

_RULE_IDS = uuid.UUID("5e0c6a43-9c1b-4f51-9d0e-7f3a2b8c1d24")


@dataclass(frozen=True)
class Observation:
    step: int
    values: dict[str, float]
    learning_rate: float
    validation: bool  # the end of a validation pass (False: a guard's every_steps check)


def _improved(rule: ReduceOnPlateau | EarlyStop, current: float, best: float | None) -> bool:
    """Better than ``best`` by more than ``min_delta`` (Keras's monitor_op)."""
    if best is None:
        return True
    if rule.higher_is_better():
        return current > best + rule.min_delta
    return current < best - rule.min_delta


class RuleBook:
    """The rules in effect and their counters (``states``: rule name -> JSON)."""

    def __init__(self, job_id: str, branch: int, rules: list[Rule]) -> None:
        self.job_id = job_id
        self.branch = branch
        self.rules = list(rules)
        self.states: dict[str, dict[str, Any]] = {}

    def replace(self, rules: list[Rule]) -> None:
        """New rules; one whose name and settings are unchanged keeps its counters."""
        before = {rule.rule_name: rule for rule in self.rules}
        self.states = {rule.rule_name: self.states[rule.rule_name] for rule in rules
                       if before.get(rule.rule_name) == rule and rule.rule_name in self.states}
        self.rules = list(rules)

    def restore(self, rules: list[dict[str, Any]] | None, states: dict[str, Any]) -> None:
        if rules is not None:
            self.rules = parse_rules(rules)
        self.states = {name: dict(value) for name, value in states.items()}

    def dump(self) -> list[dict[str, Any]]:
        return dump_rules(self.rules)

    def check_steps(self) -> list[int]:
        """The ``every_steps`` of the guards that check between validations."""
        return [rule.every_steps for rule in self.rules
                if isinstance(rule, Guard) and rule.every_steps > 0]

    def observe(self, seen: Observation) -> list[Command]:
        """Update every rule with ``seen``; the commands of those that fire."""
        fired: list[Command] = []
        for rule in self.rules:
            state = self.states.setdefault(rule.rule_name, {})
            if isinstance(rule, Guard):
                command = self._guard(rule, state, seen)
            elif not seen.validation:
                continue  # plateau and early stop count validations only
            elif isinstance(rule, ReduceOnPlateau):
                command = self._plateau(rule, state, seen)
            else:
                command = self._early_stop(rule, state, seen)
            if command is not None:
                fired.append(command)
        return fired

    def _id(self, rule: Rule, step: int) -> str:
        return str(uuid.uuid5(_RULE_IDS, f"{self.job_id}/{self.branch}/{rule.rule_name}/{step}"))

    def _plateau(self, rule: ReduceOnPlateau, state: dict[str, Any],
                 seen: Observation) -> Command | None:
        current = seen.values.get(rule.metric)
        if current is None or not math.isfinite(current):
            return None
        cooldown = int(state.get("cooldown", 0))
        if cooldown > 0:
            cooldown -= 1
            state["wait"] = 0
        state["cooldown"] = cooldown
        if _improved(rule, current, state.get("best")):
            state["best"], state["wait"] = current, 0
            return None
        if cooldown > 0:
            return None
        state["wait"] = int(state.get("wait", 0)) + 1
        if state["wait"] < rule.patience or seen.learning_rate <= rule.min_lr:
            return None
        state["wait"], state["cooldown"] = 0, rule.cooldown
        new_lr = max(seen.learning_rate * rule.factor, rule.min_lr)
        if not new_lr > 0:
            return None
        return SetLRCommand(command_id=self._id(rule, seen.step), learning_rate=new_lr,
                            mode="scale", source="rule", rule=rule.rule_name)

    def _early_stop(self, rule: EarlyStop, state: dict[str, Any],
                    seen: Observation) -> Command | None:
        current = seen.values.get(rule.metric)
        if current is None or not math.isfinite(current):
            return None
        if _improved(rule, current, state.get("best")):
            state["best"], state["wait"] = current, 0
            return None
        state["wait"] = int(state.get("wait", 0)) + 1
        if state["wait"] < rule.patience:
            return None
        return StopCommand(
            command_id=self._id(rule, seen.step), source="rule", rule=rule.rule_name,
            reason=f"stopped early by rule {rule.rule_name}: {rule.metric} did not improve "
                   f"for {state['wait']} validations (best {state['best']:.6g})")

    def _guard(self, rule: Guard, state: dict[str, Any], seen: Observation) -> Command | None:
        current = seen.values.get(rule.metric)
        if current is None:
            return None
        why = None
        if not math.isfinite(current):
            why = f"{rule.metric} is {current}"
        else:
            window = [(int(s), float(v)) for s, v in state.get("history", [])
                      if seen.step - int(s) <= rule.within_steps]
            low = min((v for _, v in window), default=None)
            if low is not None and low > 0 and current > rule.factor * low:
                why = (f"{rule.metric} grew from {low:.6g} to {current:.6g} (more than "
                       f"x{rule.factor:g}) within {rule.within_steps} steps")
            state["history"] = [*window, (seen.step, current)]
        if why is None:
            return None
        state["history"] = []  # after the pause, count afresh
        return PauseCommand(command_id=self._id(rule, seen.step), source="rule",
                            rule=rule.rule_name, reason=f"paused by rule {rule.rule_name}: {why}")
