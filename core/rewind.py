"""A rollback: a job rewound to one of its checkpoints, its later history kept aside.

Done by whoever holds the job: its worker (a running job, at a step boundary, after its
loop stopped and its writes drained) or the api (a paused job). In order:

1. the checkpoints after the target step leave object storage (meta.json first, so a
   half-deleted one is already incomplete): the next run resumes from the target, the
   newest complete checkpoint left;
2. one transaction moves the metric points after it to the abandoned history (branch n),
   marks the commands the target's state does not include as abandoned (never replayed),
   drops the later checkpoint rows, puts the job's progress back at the target and
   confirms the rollback command.

Both steps can be repeated: a process that dies between them leaves the command pending,
and the next run carries it out again.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from sqlalchemy.orm import Session

from core import repositories as repo
from core.commands import CommandOutcome
from core.steering import command_of_row
from core.storage import (
    META_FILE,
    ObjectNotFound,
    ObjectStore,
    checkpoint_file_key,
    checkpoint_keys_by_step,
    delete_checkpoint_keys,
)

log = logging.getLogger(__name__)


def applied_in_checkpoint(store: ObjectStore, job_id: str, step: int) -> list[str] | None:
    """The command ids the checkpoint's state includes (None: it does not list them)."""
    try:
        meta: Any = json.loads(store.get(checkpoint_file_key(job_id, step, META_FILE)))
    except (ObjectNotFound, ValueError):
        return None
    steering = meta.get("steering") if isinstance(meta, dict) else None
    return None if not isinstance(steering, dict) else list(steering.get("applied", []))


def rewind_job(session: Session, store: ObjectStore, *, job_id: str, to_step: int,
               command_id: str) -> CommandOutcome:
    """Rewind ``job_id`` to its checkpoint at ``to_step`` (see the module's docstring) and
    commit; returns the rollback command's outcome (for the live stream)."""
    checkpoint = repo.get_checkpoint(session, job_id=job_id, step=to_step)
    if checkpoint is None:
        raise ValueError(f"job {job_id} has no checkpoint at step {to_step}")
    kept = applied_in_checkpoint(store, job_id, to_step)
    for step, keys in sorted(checkpoint_keys_by_step(store, job_id).items()):
        if step > to_step:
            delete_checkpoint_keys(store, keys)
    branch = repo.start_branch(session, job_id=job_id, step=to_step, epoch=checkpoint.epoch)
    moved = repo.abandon_metric_points(session, job_id=job_id, after_step=to_step,
                                       branch=branch)
    abandoned = repo.abandon_commands(session, job_id=job_id, kept=kept, after_step=to_step)
    dropped = repo.delete_checkpoints_after(session, job_id=job_id, step=to_step)
    result = {"to_step": to_step, "branch": branch, "abandoned_points": moved,
              "abandoned_commands": abandoned, "checkpoints_removed": dropped}
    repo.mark_command_applied(session, command_id=command_id, applied_step=to_step,
                              result=result)
    row = repo.get_command(session, command_id=command_id)
    session.commit()
    log.info("job %s rolled back to step %d (branch %d: %d points, %d commands set aside)",
             job_id, to_step, branch, moved, abandoned)
    assert row is not None
    return CommandOutcome(command=command_of_row(row), status="applied", step=to_step,
                          at=time.time(), result=result)
