"""A stored job to point a worker's service I/O at (tests that need a row, not training)."""

from __future__ import annotations

import threading
import time
from typing import Any

from core import commands as c
from core import repositories as repo
from core.commands import CommandOutcome, SetLRCommand
from core.db import session_scope
from workers.steering.boundary import Steering

SPEC = {"name": "t", "model": [{"type": "Dense", "units": 2}],
        "data": {"train": {"builtin": "digits"}}, "loss": {"type": "l2"},
        "optimizer": {"type": "sgd"}}


def stored_job(user_name: str) -> tuple[str, str]:
    """A queued job owned by a new user ``user_name``; returns (job id, user id)."""
    with session_scope() as session:
        user = repo.create_user(session, name=user_name)
        job = repo.create_job(session, owner_id=user.id, name="t", spec=SPEC, queue="cpu")
        return job.id, user.id


def lr_outcome(change_id: str, learning_rate: float, *, step: int | None = None,
               reason: str | None = None, mode: str = "scale") -> CommandOutcome:
    """The worker's answer to a learning-rate change: applied from ``step``, or rejected
    with ``reason``."""
    command = SetLRCommand(command_id=change_id, learning_rate=learning_rate,
                           mode=mode)  # type: ignore[arg-type]
    if reason is not None:
        return CommandOutcome(command=command, status="rejected", reason=reason)
    return CommandOutcome(command=command, status="applied", step=step, at=time.time(),
                          result={"learning_rate": learning_rate})


def idle_steering() -> Steering:
    """Steering for a loop without a trainer: run-ending commands only (pause, cancel)."""
    return Steering("no-trainer", trainer=None, params={}, rules=[])


class ScriptedIO:
    """Delivers each command at the boundary after ``step - 1`` (it applies from
    ``step``), records every outcome, and can stop the run without a checkpoint at
    ``crash_at`` (a cancel writes none: what a killed worker leaves behind)."""

    def __init__(self, script: dict[int, list[c.Command]], crash_at: int | None = None):
        self.wake = threading.Event()
        self.wake.set()  # look at every step boundary
        self.script, self.crash_at = script, crash_at
        self.outcomes: list[CommandOutcome] = []
        self.events: list[Any] = []
        self.runner: Any = None  # the JobRunner, set once it is built

    def poll_commands(self) -> list[c.Command]:
        assert self.runner is not None
        self.wake.set()
        step = self.runner.state.step
        due = list(self.script.get(step + 1, []))
        if self.crash_at is not None and step == self.crash_at:
            due.append(c.CancelCommand(command_id="crash"))
        return due

    def command_done(self, outcome: CommandOutcome) -> None:
        self.outcomes.append(outcome)

    def publish(self, event: Any) -> None:
        self.events.append(event)

    def still_owner(self) -> bool:
        return True

    def checkpoint_saved(self, *args: Any, **kwargs: Any) -> bool:
        return True

    def record_metrics(self, *args: Any) -> None: ...
    def record_progress(self, *args: Any) -> None: ...
    def flush(self) -> None: ...
