"""The dispatch outbox on the job row: which queued jobs still need their task sent.

A job is (re-)queued with ``dispatch_pending`` set in the same statement
(:func:`core.repositories.jobs.transition_job`, :func:`~core.repositories.jobs.new_job_row`),
so "queued" and "to send" are one fact that no crash can split. The dispatcher
(:mod:`core.dispatch`) claims pending jobs, sends them and, if the broker refused, puts
them back. Queries flush and never commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from core.models import Job, JobStatus, utcnow

_QUEUED = JobStatus.QUEUED.value


def claim_jobs_to_dispatch(session: Session, *, limit: int) -> list[tuple[str, str]]:
    """Take up to ``limit`` pending jobs off the outbox, oldest first; ``(id, queue)`` each.

    Two dispatchers never claim the same job: on PostgreSQL the rows are picked with
    ``FOR UPDATE SKIP LOCKED`` (a second dispatcher takes the next ones instead of
    waiting); everywhere the UPDATE ... RETURNING re-checks the pending flag, and SQLite
    runs one writer at a time. The claim records the send time; commit
    it before sending, and :func:`return_to_outbox` the jobs the broker did not take.
    """
    pick = (
        select(Job.id)
        .where(Job.status == _QUEUED, Job.dispatch_pending.is_(True))
        .order_by(Job.created_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    if session.get_bind().dialect.name == "postgresql":
        # One statement: in an autocommit session a claim is one round trip.
        picked: Any = pick.scalar_subquery()
    else:
        # Read first: an idle poll then never takes SQLite's write lock.
        picked = list(session.scalars(pick))
        if not picked:
            return []
    rows = session.execute(
        update(Job)
        .where(Job.id.in_(picked), Job.status == _QUEUED, Job.dispatch_pending.is_(True))
        # updated_at is the job's user-visible "last changed"; a send is not a change.
        .values(dispatch_pending=False, dispatched_at=utcnow(), updated_at=Job.updated_at)
        .returning(Job.id, Job.queue)
        .execution_options(synchronize_session=False)
    ).all()
    session.flush()
    return [(row[0], row[1]) for row in rows]


def return_to_outbox(session: Session, *, job_ids: Sequence[str]) -> None:
    """The broker did not take these jobs' messages: send them again later."""
    if not job_ids:
        return
    session.execute(
        update(Job)
        .where(Job.id.in_(list(job_ids)), Job.status == _QUEUED)
        .values(dispatch_pending=True, updated_at=Job.updated_at)
        .execution_options(synchronize_session=False)
    )
    session.flush()


def queued_jobs_sent_before(session: Session, *, cutoff: datetime) -> list[str]:
    """Ids of queued jobs whose message went to the broker before ``cutoff`` (and was
    not taken back into the outbox since): the ones whose message the broker should hold."""
    return list(session.scalars(
        select(Job.id).where(
            Job.status == _QUEUED,
            Job.dispatch_pending.is_(False),
            Job.dispatched_at < cutoff,
        )
    ))


def put_back_in_outbox(session: Session, *, job_id: str, sent_before: datetime) -> bool:
    """Mark a queued job to be sent again, if its last send is still older than
    ``sent_before``: a compare-and-set, so of several dispatchers that found the same
    message missing only one re-sends it."""
    result = session.execute(
        update(Job)
        .where(
            Job.id == job_id,
            Job.status == _QUEUED,
            Job.dispatch_pending.is_(False),
            Job.dispatched_at < sent_before,
        )
        .values(dispatch_pending=True, updated_at=Job.updated_at)
        .execution_options(synchronize_session=False)
    )
    session.flush()
    return getattr(result, "rowcount", 0) == 1
