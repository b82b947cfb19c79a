"""Step-boundary commands: validated, rate-limited, recorded with who/when, then sent.

Every way a user steers a job goes through :func:`request_command`: the learning-rate
endpoint and ``POST /v1/jobs/{id}/commands`` alike. The row is committed before the
command is sent on the control stream (the worker confirms against it); a job that is not
running applies its pending commands when it next starts.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import redis
from sqlalchemy.orm import Session

from api import telemetry
from api.errors import ApiError, field_error, not_found
from api.schemas.commands import CommandPublic
from api.state import ServiceState
from core import repositories
from core.channel import commands_rate_key, lr_changes_key
from core.commands import ENVELOPE_FIELDS, CancelCommand, Command, PauseCommand, StepCommand
from core.config import RateLimit
from core.jobspec import JobSpec
from core.models import TERMINAL_STATUSES, Job, JobCommand, JobStatus, User, new_id, utcnow
from core.steering import (
    AppliedCommand,
    CommandRefused,
    JobContext,
    command_of_row,
    hyperparameters_in_effect,
    validate,
)

log = logging.getLogger("rudder.api")

# Without Redis (RUDDER_REDIS_URL unset: the single-process development setup) the limit
# is counted in the database, and this lock makes count-then-insert one step within the
# process. With Redis the limit lives there and holds across any number of api processes.
_COUNT_IN_DB = threading.Lock()
# What each kind does, for messages ("cannot <verb> a succeeded job").
_VERBS = {"set_lr": "change the learning rate of", "set_hyperparameters": "change the "
          "hyperparameters of", "set_schedule": "replace the schedule of", "freeze": "freeze "
          "parameters of", "unfreeze": "unfreeze parameters of", "evaluate": "evaluate",
          "checkpoint": "checkpoint", "set_rules": "change the rules of",
          "rollback": "roll back", "pause": "pause", "cancel": "cancel"}


@dataclass(frozen=True)
class RateGroup:
    """The commands counted together against one limit."""

    what: str
    kinds: frozenset[str]
    key: Any  # job_id -> Redis key

    def limits(self, state: ServiceState) -> RateLimit:
        settings = state.settings
        return settings.lr if self.what == "learning-rate changes" else settings.commands


_LR = RateGroup("learning-rate changes", frozenset({"set_lr"}), lr_changes_key)
_OTHERS = RateGroup("step-boundary commands", frozenset({
    "set_hyperparameters", "set_schedule", "freeze", "unfreeze", "evaluate", "checkpoint",
    "set_rules", "rollback"}), commands_rate_key)


def _rate_group(kind: str) -> RateGroup | None:
    return next((g for g in (_LR, _OTHERS) if kind in g.kinds), None)


def _rate_limited(group: RateGroup, limits: RateLimit, wait_seconds: float) -> ApiError:
    retry_after = max(1, math.ceil(wait_seconds))
    return ApiError(
        429, "rate_limited",
        f"at most {limits.max_changes} {group.what} per {limits.window_seconds:g} s for one "
        f"job; retry in {retry_after} s",
        details={"retry_after": retry_after}, headers={"Retry-After": str(retry_after)},
    )


def _store(session: Session, job: Job, command: StepCommand) -> JobCommand:
    row = repositories.create_command(session, job_id=job.id, command=command)
    session.commit()
    return row


def _store_admitted_by_redis(session: Session, state: ServiceState, job: Job,
                             command: StepCommand, group: RateGroup) -> JobCommand:
    assert state.channel is not None
    limits = group.limits(state)
    key = group.key(job.id)
    try:
        admission = state.channel.admit(key, max_changes=limits.max_changes,
                                        window_seconds=limits.window_seconds)
    except redis.RedisError as exc:
        # Fail closed with a retryable 503 rather than store the command unlimited: a
        # running worker hears of commands only through Redis, so one accepted now would
        # sit "pending" unseen until the job restarts, which is worse than a retry.
        log.warning("command for job %s refused: Redis is not answering (%s)", job.id, exc)
        raise ApiError(503, "unavailable", "the live channel (Redis) is not answering; the "
                       "command was not recorded, retry shortly") from exc
    if not admission.admitted:
        raise _rate_limited(group, limits, admission.retry_after_s)
    try:
        return _store(session, job, command)
    except Exception:
        try:  # not stored, so it must not count against the job's limit
            state.channel.release(key, admission.token)
        except redis.RedisError:
            log.warning("could not give back the rate-limit slot of job %s", job.id)
        raise


def _store_counted_in_db(session: Session, state: ServiceState, job: Job,
                         command: StepCommand, group: RateGroup) -> JobCommand:
    limits = group.limits(state)
    with _COUNT_IN_DB:
        now = utcnow()
        window = timedelta(seconds=limits.window_seconds)
        recent = repositories.command_times_since(session, job_id=job.id, since=now - window,
                                                  kinds=group.kinds)
        if len(recent) >= limits.max_changes:
            blocking = recent[-limits.max_changes]
            raise _rate_limited(group, limits, (blocking + window - now).total_seconds())
        return _store(session, job, command)


def job_context(session: Session, state: ServiceState, job: Job,
                kind: str = "") -> JobContext:
    """The job as the validators see it (checkpoints and frozen names only when needed)."""
    steps: tuple[int, ...] = ()
    if kind == "rollback":
        steps = tuple(c.step for c in repositories.list_checkpoints(session, job_id=job.id))
    frozen: tuple[str, ...] = ()
    spec = JobSpec.model_validate(job.spec)
    if kind == "unfreeze":
        effect = hyperparameters_in_effect(spec, applied_commands(session, job),
                                           _parameter_names(job))
        frozen = tuple(effect["frozen"])
    bounds = (state.settings.lr.min, state.settings.lr.max)
    return JobContext(spec=spec, status=job.status, lr_bounds=bounds,
                      parameters=job.parameters, checkpoint_steps=steps, frozen=frozen)


def _parameter_names(job: Job) -> list[str]:
    return [str(p["name"]) for p in job.parameters or []]


def applied_commands(session: Session, job: Job) -> list[AppliedCommand]:
    """The job's applied commands on its live branch, by the step they took effect."""
    rows = repositories.list_commands(session, job_id=job.id, statuses=["applied"])
    return [AppliedCommand(step=int(r.applied_step or 0), command=command_of_row(r))
            for r in rows if not r.abandoned]


def _refused(error: CommandRefused) -> ApiError:
    if error.status == 409:
        return ApiError(409, "invalid_state", error.message,
                        details=[{"field": error.field, "message": error.message}])
    return field_error(error.field, error.message, status_code=error.status)


def check_envelope(command: StepCommand) -> None:
    """The envelope is the server's to fill: a request that sets it is refused."""
    given = sorted(command.model_fields_set & ENVELOPE_FIELDS)
    if given:
        raise field_error(given[0], "is set by the server")


def request_command(session: Session, *, state: ServiceState, job: Job, user: User,
                    command: Command, send_now: bool = True) -> JobCommand:
    """Validate, rate-limit, record (who, when) and send one of the user's commands
    (``send_now=False``: the caller carries it out itself)."""
    check_envelope(command)
    if JobStatus(job.status) in TERMINAL_STATUSES:
        raise ApiError(409, "invalid_state",
                       f"cannot {_VERBS.get(command.type, command.type)} a {job.status} job",
                       details={"status": job.status})
    stamped: Command = command.model_copy(update={
        "command_id": new_id(), "requested_by": user.id, "source": "user", "rule": None})
    if isinstance(stamped, PauseCommand | CancelCommand) and stamped.reason is None:
        # the job's status then names who, as a pause or cancel of a queued job does
        verb = "paused" if stamped.type == "pause" else "cancelled"
        stamped = stamped.model_copy(update={"reason": f"{verb} by {user.name}"})
    try:
        validate(stamped, job_context(session, state, job, stamped.type))
    except CommandRefused as error:
        raise _refused(error) from None
    group = _rate_group(stamped.type)
    if group is None:
        row = _store(session, job, stamped)
    elif state.channel is None:
        row = _store_counted_in_db(session, state, job, stamped, group)
    else:
        row = _store_admitted_by_redis(session, state, job, stamped, group)
    if stamped.type == "set_lr":
        telemetry.LR_CHANGES.inc()
    if send_now:
        send(session, state, job, row, stamped)
    return row


def record_and_send(session: Session, *, state: ServiceState, job: Job,
                    command: StepCommand) -> JobCommand:
    """Record a command the api issues itself (pause, cancel) and send it."""
    row = _store(session, job, command)
    send(session, state, job, row, command)
    return row


def send(session: Session, state: ServiceState, job: Job, row: JobCommand,
         command: StepCommand) -> None:
    """After commit: hand the command to the job's worker (a job that is not running
    applies its pending commands from the DB when it starts). When Redis refuses, a
    running worker would never hear of it: the row is marked rejected, with why, and the
    caller gets a retryable 503; nothing else changed."""
    if state.channel is None:
        return
    try:
        state.channel.send_command(job.id, command)  # type: ignore[arg-type]
    except redis.RedisError as exc:
        log.warning("command %s for job %s not sent: %r", command.command_id, job.id, exc)
        repositories.mark_command_rejected(
            session, command_id=row.id,
            reason="not delivered: the live channel (Redis) was not answering")
        session.commit()
        raise ApiError(503, "unavailable", "the live channel (Redis) is not answering; the "
                       "command was not sent, retry shortly") from exc


# ---------------------------------------------------------------- reads


def public(session: Session, rows: list[JobCommand]) -> list[CommandPublic]:
    """Rows as the api shows them, each with who asked by name."""
    names: dict[str, str] = {}
    shown = []
    for row in rows:
        if row.source == "rule":
            by = f"rule {row.rule}"
        elif row.source == "fork":
            by = "fork"
        else:
            if row.requested_by and row.requested_by not in names:
                found = repositories.get_user(session, user_id=row.requested_by)
                names[row.requested_by] = found.name if found else row.requested_by
            by = names.get(row.requested_by or "", "user")
        shown.append(CommandPublic.model_validate({
            "id": row.id, "kind": row.kind, "params": row.params or {}, "status": row.status,
            "source": row.source, "by": by, "requested_by": row.requested_by,
            "rule": row.rule, "requested_at": row.requested_at,
            "checkpoint_before": bool(row.checkpoint_before), "applied_step": row.applied_step,
            "applied_at": row.applied_at, "result": row.result, "reason": row.reason,
            "abandoned": bool(row.abandoned),
        }))
    return shown


def list_public(session: Session, *, job: Job, kinds: frozenset[str] | None = None
                ) -> list[CommandPublic]:
    return public(session, repositories.list_commands(session, job_id=job.id, kinds=kinds))


def get_command(session: Session, *, job: Job, command_id: str) -> CommandPublic:
    row = repositories.get_command(session, command_id=command_id, job_id=job.id)
    if row is None:
        raise not_found("command", command_id)
    return public(session, [row])[0]
