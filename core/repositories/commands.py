"""Step-boundary commands (core.commands): requested, applied at a step, or rejected.

A learning-rate change is the ``set_lr`` kind; the ``*_lr_change`` functions are its view
for the learning-rate endpoints. Queries flush and never commit (see
core/repositories/__init__.py)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from core.commands import SetLRCommand, StepCommand
from core.models import CommandStatus, JobCommand, LRChangeMode, utcnow

SET_LR = "set_lr"


def create_command(session: Session, *, job_id: str, command: StepCommand) -> JobCommand:
    """The row of a command the api accepted (pending; its id is the command's)."""
    row = JobCommand(
        id=command.command_id, job_id=job_id, kind=command.type, params=command.payload(),
        source=command.source, rule=command.rule, requested_by=command.requested_by,
        checkpoint_before=command.checkpoint_before, status=CommandStatus.PENDING.value,
    )
    session.add(row)
    session.flush()
    return row


def ensure_command(session: Session, *, job_id: str, command: StepCommand) -> None:
    """The row of a command the worker issued itself (a rule's), unless it exists: a
    resumed run that fires the same rule at the same step re-sends it with the same id."""
    if session.get(JobCommand, command.command_id) is None:
        create_command(session, job_id=job_id, command=command)


def get_command(session: Session, *, command_id: str, job_id: str | None = None
                ) -> JobCommand | None:
    row = session.get(JobCommand, command_id)
    if row is None or (job_id is not None and row.job_id != job_id):
        return None
    return row


def list_commands(
    session: Session, *, job_id: str, kinds: Collection[str] | None = None,
    statuses: Collection[str] | None = None,
) -> list[JobCommand]:
    """Oldest first."""
    query = select(JobCommand).where(JobCommand.job_id == job_id)
    if kinds is not None:
        query = query.where(JobCommand.kind.in_(list(kinds)))
    if statuses is not None:
        query = query.where(JobCommand.status.in_(list(statuses)))
    return list(session.scalars(query.order_by(JobCommand.requested_at, JobCommand.id)))


def command_times_since(session: Session, *, job_id: str, since: datetime,
                        kinds: Collection[str]) -> list[datetime]:
    """Request times of the user's commands of ``kinds`` since ``since``, oldest first
    (rate limits)."""
    query = (
        select(JobCommand.requested_at)
        .where(JobCommand.job_id == job_id, JobCommand.requested_at >= since,
               JobCommand.source == "user", JobCommand.kind.in_(list(kinds)))
        .order_by(JobCommand.requested_at)
    )
    return list(session.scalars(query))


def mark_command_applied(
    session: Session, *, command_id: str, applied_step: int,
    result: dict[str, Any] | None = None, applied_at: datetime | None = None,
) -> bool:
    """Confirm a command; idempotent (a replayed confirmation keeps the first step)."""
    outcome = session.execute(
        update(JobCommand)
        .where(JobCommand.id == command_id, JobCommand.status == CommandStatus.PENDING.value)
        .values(status=CommandStatus.APPLIED.value, applied_step=applied_step,
                applied_at=applied_at or utcnow(), result=result or {})
        .execution_options(synchronize_session=False)
    )
    session.flush()
    return getattr(outcome, "rowcount", 0) == 1


def mark_command_rejected(session: Session, *, command_id: str, reason: str) -> bool:
    outcome = session.execute(
        update(JobCommand)
        .where(JobCommand.id == command_id, JobCommand.status == CommandStatus.PENDING.value)
        .values(status=CommandStatus.REJECTED.value, reason=reason)
        .execution_options(synchronize_session=False)
    )
    session.flush()
    return getattr(outcome, "rowcount", 0) == 1


def reject_pending_commands(session: Session, *, job_id: str, reason: str) -> list[JobCommand]:
    """Refuse every command of the job still pending (it ended: none will ever run);
    returns them, refused."""
    pending = list_commands(session, job_id=job_id, statuses=[CommandStatus.PENDING.value])
    for row in pending:
        mark_command_rejected(session, command_id=row.id, reason=reason)
        session.refresh(row)
    return pending


def abandon_commands(session: Session, *, job_id: str, kept: Collection[str] | None,
                     after_step: int) -> int:
    """Mark the applied commands a rollback to the checkpoint at ``after_step`` discards:
    those not in ``kept`` (the ids that checkpoint's state includes), or, for a checkpoint
    that does not list them, those applied from a step after it. They stay in the history;
    a resume never replays them. Returns how many."""
    query = (update(JobCommand)
             .where(JobCommand.job_id == job_id,
                    JobCommand.status == CommandStatus.APPLIED.value,
                    JobCommand.abandoned.is_(False)))
    if kept is None:
        query = query.where(JobCommand.applied_step > after_step)
    else:
        query = query.where(JobCommand.id.not_in(list(kept)))
    outcome = session.execute(query.values(abandoned=True)
                              .execution_options(synchronize_session=False))
    session.flush()
    return int(getattr(outcome, "rowcount", 0))


# ------------------------------------------------------------------ learning-rate view


def create_lr_change(session: Session, *, job_id: str, requested_lr: float,
                     mode: LRChangeMode, requested_by: str) -> JobCommand:
    command = SetLRCommand(learning_rate=requested_lr, mode=mode.value,
                           requested_by=requested_by)
    return create_command(session, job_id=job_id, command=command)


def get_lr_change(session: Session, *, change_id: str) -> JobCommand | None:
    row = session.get(JobCommand, change_id)
    return row if row is not None and row.kind == SET_LR else None


def list_lr_changes(session: Session, *, job_id: str) -> list[JobCommand]:
    return list_commands(session, job_id=job_id, kinds=[SET_LR])


def lr_change_times_since(session: Session, *, job_id: str, since: datetime) -> list[datetime]:
    return command_times_since(session, job_id=job_id, since=since, kinds=[SET_LR])


def mark_lr_change_applied(session: Session, *, change_id: str, applied_step: int,
                           applied_lr: float | None = None,
                           applied_at: datetime | None = None) -> bool:
    result = None if applied_lr is None else {"learning_rate": applied_lr}
    return mark_command_applied(session, command_id=change_id, applied_step=applied_step,
                                result=result, applied_at=applied_at)


def mark_lr_change_rejected(session: Session, *, change_id: str, reason: str) -> bool:
    return mark_command_rejected(session, command_id=change_id, reason=reason)
