"""How long a job has trained and how fast it goes now, from what was recorded.

``started_at`` is reset by every resume, so a duration from it counts only the last run;
the status history holds every run: the time spent ``running`` is summed over all of
them. The pace is the steps reported over the last minute (the worker's own clock, via
the metric points' times), so an ETA follows the job as it speeds up or slows down.

>>> from datetime import datetime, timedelta
>>> t0 = datetime(2026, 1, 1, tzinfo=UTC)
>>> running_seconds([("running", t0), ("paused", t0 + timedelta(seconds=30)),
...                  ("queued", t0 + timedelta(seconds=90)),
...                  ("running", t0 + timedelta(seconds=100)),
...                  ("succeeded", t0 + timedelta(seconds=110))], now=t0)
40.0
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from api.schemas.jobs import JobPublic
from core import repositories
from core.models import Job, JobStatus, JobStatusEvent

# The window the pace is measured over: long enough to span a few metric reports.
THROUGHPUT_WINDOW = timedelta(seconds=60)


def _aware(moment: datetime) -> datetime:
    """SQLite hands datetimes back naive; they were stored in UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def running_seconds(history: Sequence[tuple[str, datetime]], *, now: datetime) -> float:
    """Seconds spent in ``running`` over every run; a run still going counts up to now."""
    total = 0.0
    since: datetime | None = None
    for status, at in history:
        at = _aware(at)
        if status == JobStatus.RUNNING and since is None:
            since = at
        elif status != JobStatus.RUNNING and since is not None:
            total += max(0.0, (at - since).total_seconds())
            since = None
    if since is not None:
        total += max(0.0, (_aware(now) - since).total_seconds())
    return round(total, 1)


def _history(events: Sequence[JobStatusEvent]) -> list[tuple[str, datetime]]:
    return [(event.status, event.created_at) for event in events]


def recent_steps_per_second(session: Session, *, job_id: str) -> float | None:
    """Steps per second over the last minute of reported steps (over the last few
    thousand points if those span less); None without two steps to measure between."""
    latest: dict[int, datetime] = {}
    for moment, step in repositories.latest_step_times(session, job_id=job_id):
        moment = _aware(moment)
        latest[step] = max(moment, latest.get(step, moment))
    if not latest:
        return None
    newest = max(latest.values())
    recent = sorted((step, t) for step, t in latest.items() if newest - t <= THROUGHPUT_WINDOW)
    if len(recent) < 2:
        return None
    (first_step, first_time), (last_step, last_time) = recent[0], recent[-1]
    elapsed = (last_time - first_time).total_seconds()
    if elapsed <= 0 or last_step <= first_step:
        return None
    return round((last_step - first_step) / elapsed, 3)


def job_public(session: Session, job: Job, *, with_spec: bool = True) -> JobPublic:
    """One job with its total running time, and its pace while it runs."""
    now = datetime.now(UTC)
    history = _history(repositories.list_status_events(session, job_id=job.id))
    pace = (recent_steps_per_second(session, job_id=job.id)
            if job.status == JobStatus.RUNNING else None)
    public = JobPublic.model_validate(job)
    return public.model_copy(update={
        "running_seconds": running_seconds(history, now=now), "steps_per_second": pace,
        **({} if with_spec else {"spec": None}),
    })


def jobs_public(session: Session, jobs: Sequence[Job]) -> list[JobPublic]:
    """A page of the list: running times from one query, without specs or pace."""
    now = datetime.now(UTC)
    events = repositories.status_events_of(session, job_ids=[job.id for job in jobs])
    return [
        JobPublic.model_validate(job).model_copy(update={
            "spec": None, "running_seconds": running_seconds(_history(events[job.id]), now=now),
        })
        for job in jobs
    ]
