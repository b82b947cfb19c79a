"""The worker's steering at step boundaries: (a) collect, (b) apply, rules, state.

:class:`Steering` is what the training loop's handler holds. It keeps the two halves of
:mod:`workers.steering` apart: :meth:`due` decides (reading nothing itself: the handler
passes what the control stream delivered), :meth:`apply` changes the trainer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from core.commands import Command, CommandOutcome
from core.rules import Rule
from workers.steering.apply import Applied, Target, apply_commands, restore
from workers.steering.collect import Collector
from workers.steering.rules import Observation, RuleBook
from workers.steering.state import SteeringState


class Steering:
    """One job's commands and rules on one branch of its history."""

    def __init__(self, job_id: str, trainer: Any, params: dict[str, Any], rules: list[Rule],
                 *, branch: int = 0) -> None:
        self.rules = RuleBook(job_id, branch, rules)
        self.target = Target(trainer=trainer, params=params, state=SteeringState(),
                             rules=self.rules)
        self.collector = Collector()

    @property
    def state(self) -> SteeringState:
        return self.target.state

    # (a)
    def due(self, received: Iterable[Command], step: int,
            rules: Iterable[Command] = ()) -> tuple[list[Command], list[CommandOutcome]]:
        return self.collector.due(received, rules, step)

    def observe(self, step: int, values: dict[str, float], learning_rate: float,
                validation: bool) -> list[Command]:
        """What the rules decide on these metric values (commands for :meth:`due`)."""
        return self.rules.observe(Observation(step, values, learning_rate, validation))

    def next_check(self, step: int) -> int | None:
        """The next step at which a guard checks the running training values."""
        every = self.rules.check_steps()
        return min(((step // e) + 1) * e for e in every) if every else None

    # (b)
    def apply(self, commands: list[Command], step: int) -> Applied:
        return apply_commands(self.target, commands, step)

    # checkpoints
    def snapshot(self) -> dict[str, Any]:
        """The state a checkpoint saves (meta.json's ``steering``)."""
        self.state.rule_states = {k: dict(v) for k, v in self.rules.states.items()}
        return self.state.to_json()

    def restore(self, saved: dict[str, Any] | None) -> None:
        """Back to a checkpoint's state (call before the trainer state is loaded)."""
        state = SteeringState.from_json(saved)
        restore(self.target, state)
        self.collector.seen |= set(state.applied)

    def replayed(self, command_id: str) -> None:
        """A command re-applied at its step on resume: never applied a second time."""
        self.collector.seen.add(command_id)
