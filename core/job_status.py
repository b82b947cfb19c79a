"""Move a job to a new status and announce it: the one way both processes do it.

The DB row is the durable record and changes first (a compare-and-set on the current
status, so concurrent actors cannot both win); the ``status`` event on the live channel
follows the commit and is a courtesy: a Redis failure is logged, never raised, since the
row already says what happened.

>>> moved = transition_and_announce(  # doctest: +SKIP
...     session, channel, job_id=job.id, to_status=JobStatus.PAUSED,
...     from_statuses=[JobStatus.QUEUED], reason="paused by alice")
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy.orm import Session

from core import repositories as repo
from core.channel import Channel
from core.commands import CommandOutcome
from core.events import JobEvent, StatusEvent
from core.models import TERMINAL_STATUSES, JobStatus
from core.steering import command_of_row, outcome_event

log = logging.getLogger(__name__)


def transition_and_announce(
    session: Session,
    channel: Channel | None,
    *,
    job_id: str,
    to_status: JobStatus,
    from_statuses: Sequence[JobStatus],
    reason: str | None,
    step: int | None = None,
    command_id: str | None = None,
) -> bool:
    """True when this call moved the job (and committed); False, rolled back, otherwise."""
    moved = repo.transition_job(session, job_id=job_id, to_status=to_status,
                                from_statuses=list(from_statuses), reason=reason)
    if not moved:
        session.rollback()
        return False
    refused = []
    if to_status in TERMINAL_STATUSES:
        # A finished job never reaches another step boundary: every command still
        # waiting is refused now, in the same transaction, never left pending.
        refused = repo.reject_pending_commands(session, job_id=job_id,
                                               reason=f"job {to_status.value}")
    outcomes = [CommandOutcome(command=command_of_row(row), status="rejected",
                               reason=row.reason) for row in refused]
    session.commit()
    for outcome in outcomes:  # before the status: a stream ends after a terminal one
        announce_status(channel, job_id, outcome_event(outcome))
    announce_status(channel, job_id, StatusEvent(status=to_status.value, reason=reason,
                                                 step=step, command_id=command_id))
    return True


def announce_status(channel: Channel | None, job_id: str, event: JobEvent) -> None:
    """Publish a status (or command) event, logging (not raising) when the channel is
    down."""
    if channel is None:
        return
    try:
        channel.publish(job_id, event)
    except Exception:  # noqa: BLE001 - the DB row is the durable record
        log.exception("could not publish status event for job %s", job_id)
