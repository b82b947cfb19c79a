"""(a) Which commands are due at a step boundary.

The worker's control listener delivers the user's commands (and, at start, the ones the
database still holds pending: some arrive twice); the job's rules add theirs at the end of
a validation. This half dedupes by command id, keeps the order they arrived in, and
refuses a rule's command that would change what a user's command changed at the same step
(the user's wins). It never touches the trainer; :mod:`workers.steering.apply` does.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from core.commands import Command, CommandOutcome


class Collector:
    """Remembers every command id seen (applied, replayed or refused) on this branch."""

    def __init__(self, seen: Iterable[str] = ()) -> None:
        self.seen: set[str] = set(seen)
        self._user_step = -1
        self._user_targets: set[str] = set()

    def due(self, received: Iterable[Command], rules: Iterable[Command], step: int
            ) -> tuple[list[Command], list[CommandOutcome]]:
        """The commands to apply at the boundary after ``step`` (rules' first, then the
        users' in arrival order), and the rules' commands refused because a user's command
        changed the same thing at this step."""
        if step != self._user_step:
            self._user_step, self._user_targets = step, set()
        users = [c for c in received if self._first_time(c)]
        for command in users:
            self._user_targets |= command.targets()
        ruled: list[Command] = []
        refused: list[CommandOutcome] = []
        for command in rules:
            if not self._first_time(command):
                continue
            clash = command.targets() & self._user_targets
            if clash:
                refused.append(CommandOutcome(
                    command=command, status="rejected", at=time.time(),
                    reason=f"a user's change of {', '.join(sorted(clash))} at step "
                           f"{step + 1} wins over the rule's"))
            else:
                ruled.append(command)
        return ruled + users, refused

    def _first_time(self, command: Command) -> bool:
        if command.command_id in self.seen:
            return False
        self.seen.add(command.command_id)
        return True
