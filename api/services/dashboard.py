"""The dashboard's reads: metric series thinned for display, and the runtime timeline.

>>> import numpy as np
>>> keep_extremes(np.array([0.0, 5.0, 1.0, -3.0, 2.0, 2.0, 2.0, 2.0]), max_points=4).tolist()
[0, 1, 3, 7]
"""

from __future__ import annotations

import bisect
import math
from datetime import UTC, datetime
from itertools import accumulate

import numpy as np
from numpy.typing import NDArray
from sqlalchemy.orm import Session

from api.schemas.dashboard import (
    EpochBoundary,
    MetricSeriesPublic,
    MetricSeriesSetPublic,
    TimelineEntryPublic,
    TimelinePublic,
)
from core import repositories
from core.models import Job

# Each bucket keeps up to four points (first, min, max, last): the shape survives.
POINTS_PER_BUCKET = 4


def keep_extremes(values: NDArray[np.float64], *, max_points: int) -> NDArray[np.intp]:
    """Indices (ascending) of at most ``max_points`` values that keep each bucket's first,
    smallest, largest and last value, so spikes and dips survive the thinning."""
    n = len(values)
    if n <= max_points:
        return np.arange(n)
    buckets = max(1, max_points // POINTS_PER_BUCKET)
    width = math.ceil(n / buckets)
    buckets = math.ceil(n / width)
    padded = buckets * width
    lows = np.full(padded, np.inf)
    highs = np.full(padded, -np.inf)
    lows[:n] = values
    highs[:n] = values
    start = np.arange(buckets) * width
    chosen = np.concatenate([
        start,
        start + lows.reshape(buckets, width).argmin(axis=1),
        start + highs.reshape(buckets, width).argmax(axis=1),
        np.minimum(start + width - 1, n - 1),
    ])
    return np.unique(chosen[chosen < n])


def metric_series(
    session: Session, *, job_id: str, names: list[str] | None, max_points: int
) -> MetricSeriesSetPublic:
    series: list[MetricSeriesPublic] = []
    first_step: dict[int, int] = {}
    for column in repositories.metric_columns(session, job_id=job_id, names=names):
        steps, epochs, values = column.steps, column.epochs, column.values
        # An epoch starts where the epoch number changes (or at the first point).
        starts = np.flatnonzero(np.diff(epochs, prepend=epochs[0] - 1))
        for epoch, step in zip(epochs[starts].tolist(), steps[starts].tolist(), strict=True):
            first_step[epoch] = min(step, first_step.get(epoch, step))
        keep = keep_extremes(values, max_points=max_points)
        series.append(MetricSeriesPublic(
            name=column.name, steps=steps[keep].tolist(), values=values[keep].tolist(),
            total_points=len(values), downsampled=len(keep) < len(values),
        ))
    return MetricSeriesSetPublic(
        job_id=job_id,
        series=series,
        epochs=[EpochBoundary(epoch=e, first_step=s) for e, s in sorted(first_step.items())],
    )


def _aware(moment: datetime) -> datetime:
    """SQLite hands datetimes back naive; they were stored in UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def timeline(session: Session, *, job: Job) -> TimelinePublic:
    """Applied/rejected lr changes, status changes and checkpoints, oldest first.

    Status changes record only a time; they are placed at the last step reported by then.
    """
    by_time = [(_aware(t), step) for t, step in
               repositories.metric_steps_by_time(session, job_id=job.id)]
    by_time.sort()
    times = [t for t, _ in by_time]
    furthest = list(accumulate((step for _, step in by_time), max))

    def step_at(moment: datetime) -> int | None:
        at = bisect.bisect_right(times, _aware(moment))
        return furthest[at - 1] if at else None

    entries: list[TimelineEntryPublic] = []
    users: dict[str, str] = {}
    for change in repositories.list_lr_changes(session, job_id=job.id):
        if change.status == "pending":
            continue
        if change.requested_by not in users:
            user = repositories.get_user(session, user_id=change.requested_by)
            users[change.requested_by] = user.name if user else change.requested_by
        who = users[change.requested_by]
        requested = f"requested {change.requested_lr:g} ({change.mode}) by {who}"
        when = _aware(change.requested_at).strftime("%Y-%m-%d %H:%M:%S UTC")
        if change.status == "applied":
            applied = change.applied_lr if change.applied_lr is not None else change.requested_lr
            title = f"lr {applied:g}"
            detail = f"{requested} at {when}; applied at step {change.applied_step}"
            step = change.applied_step
        else:
            title = "lr change rejected"
            detail = f"{requested} at {when}; rejected: {change.reason}"
            step = step_at(change.requested_at)
        entries.append(TimelineEntryPublic(
            kind="lr", step=step, time=_aware(change.applied_at or change.requested_at),
            title=title, detail=detail,
        ))
    previous: str | None = None
    seen_running = resuming = False
    for event in repositories.list_status_events(session, job_id=job.id):
        title = event.status
        if event.status == "queued" and previous == "paused":
            title, resuming = "resume requested", True
        elif event.status == "queued" and previous == "running":
            title = "requeued (its worker stopped)"
        elif event.status == "running" and seen_running:
            # A run after the first one starts from the latest checkpoint.
            title = "resumed" if resuming else "worker restarted (resumed from checkpoint)"
        if event.status == "running":
            seen_running, resuming = True, False
        previous = event.status
        entries.append(TimelineEntryPublic(
            kind="status", step=step_at(event.created_at), time=_aware(event.created_at),
            title=title, detail=event.reason or "",
        ))
    for checkpoint in repositories.list_checkpoints(session, job_id=job.id):
        entries.append(TimelineEntryPublic(
            kind="checkpoint", step=checkpoint.step, time=_aware(checkpoint.created_at),
            title=f"checkpoint (epoch {checkpoint.epoch})",
            detail=f"{checkpoint.size} bytes",
        ))
    entries.sort(key=lambda entry: entry.time)
    return TimelinePublic(job_id=job.id, entries=entries)
