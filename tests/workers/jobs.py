"""A stored job to point a worker's service I/O at (tests that need a row, not training)."""

from __future__ import annotations

from core import repositories as repo
from core.db import session_scope

SPEC = {"name": "t", "model": [{"type": "Dense", "units": 2}],
        "data": {"train": {"builtin": "digits"}}, "loss": {"type": "l2"},
        "optimizer": {"type": "sgd"}}


def stored_job(user_name: str) -> tuple[str, str]:
    """A queued job owned by a new user ``user_name``; returns (job id, user id)."""
    with session_scope() as session:
        user = repo.create_user(session, name=user_name)
        job = repo.create_job(session, owner_id=user.id, name="t", spec=SPEC, queue="cpu")
        return job.id, user.id
