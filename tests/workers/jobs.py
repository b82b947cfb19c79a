"""A stored job to point a worker's service I/O at (tests that need a row, not training)."""

from __future__ import annotations

import time

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
