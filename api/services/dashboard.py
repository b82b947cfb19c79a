"""The dashboard's reads: metric series thinned for display, and the runtime timeline.

>>> import numpy as np
>>> keep_extremes(np.array([0.0, 5.0, 1.0, -3.0, 2.0, 2.0, 2.0, 2.0]), max_points=4).tolist()
[0, 1, 3, 7]
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from datetime import UTC, datetime
from itertools import accumulate
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy.orm import Session

from api.schemas.dashboard import (
    EpochBoundary,
    MetricSeriesPublic,
    MetricSeriesSetPublic,
    StepClock,
    TimelineEntryPublic,
    TimelinePublic,
)
from api.services.commands import public
from core import repositories
from core.commands import RUN_ENDING
from core.models import Job, JobCommand

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
    session: Session, *, job_id: str, names: list[str] | None, max_points: int,
    include_abandoned: bool = False,
) -> MetricSeriesSetPublic:
    series: list[MetricSeriesPublic] = []
    busiest: str | None = None  # the metric with the most points: the step clock's source
    first_step: dict[int, int] = {}
    last_step: dict[int, int] = {}
    for column in repositories.metric_columns(session, job_id=job_id, names=names):
        steps, epochs, values = column.steps, column.epochs, column.values
        # An epoch starts where the epoch number changes (or at the first point).
        starts = np.flatnonzero(np.diff(epochs, prepend=epochs[0] - 1))
        for epoch, step in zip(epochs[starts].tolist(), steps[starts].tolist(), strict=True):
            first_step[epoch] = min(step, first_step.get(epoch, step))
        ends = np.flatnonzero(np.diff(epochs, append=epochs[-1] + 1))
        for epoch, step in zip(epochs[ends].tolist(), steps[ends].tolist(), strict=True):
            last_step[epoch] = max(step, last_step.get(epoch, step))
        if busiest is None or len(values) > max(s.total_points for s in series):
            busiest = column.name
        keep = keep_extremes(values, max_points=max_points)
        series.append(MetricSeriesPublic(
            name=column.name, steps=steps[keep].tolist(), values=values[keep].tolist(),
            total_points=len(values), downsampled=len(keep) < len(values),
        ))
    if include_abandoned:
        series += _abandoned_series(session, job_id=job_id, names=names, max_points=max_points)
    return MetricSeriesSetPublic(
        job_id=job_id,
        series=series,
        clock=step_clock(session, job_id=job_id, name=busiest, max_points=max_points),
        epochs=[EpochBoundary(epoch=e, first_step=s, last_step=last_step[e])
                for e, s in sorted(first_step.items())],
    )


def step_clock(session: Session, *, job_id: str, name: str | None,
               max_points: int) -> StepClock:
    """When each step was reported, from the metric reported most often (every step it
    reported), evenly thinned to ``max_points`` in the query (ends kept)."""
    if name is None:
        return StepClock(steps=[], times=[])
    pairs = repositories.sampled_step_times(session, job_id=job_id, name=name,
                                            max_points=max_points)
    return StepClock(steps=[step for _, step in pairs],
                     times=[round(_aware(t).timestamp(), 3) for t, _ in pairs])


def _aware(moment: datetime) -> datetime:
    """SQLite hands datetimes back naive; they were stored in UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# Commands whose applied step is where the run stopped (a rollback's is where it went to).
_RUN_ENDING = RUN_ENDING - {"rollback"}


def timeline(session: Session, *, job: Job) -> TimelinePublic:
    """Every step-boundary command (lr changes included, pending ones too), status
    changes and checkpoints, oldest first: what the charts mark.

    Status changes record only a time; they are placed at the furthest step known by then
    (from metric points, checkpoints and the steps where pauses, cancels and stops took
    effect: a pause's status change lands on the step the run stopped at, not on the last
    metric point, which may be hundreds of steps earlier), as are commands not applied
    (pending or rejected).
    """
    rows = repositories.list_commands(session, job_id=job.id)
    checkpoints = repositories.list_checkpoints(session, job_id=job.id)
    by_time = [(_aware(t), step) for t, step in
               repositories.metric_steps_by_time(session, job_id=job.id)]
    by_time += [(_aware(c.created_at), c.step) for c in checkpoints]
    by_time += [(_aware(r.applied_at), r.applied_step) for r in rows
                if r.kind in _RUN_ENDING and r.status == "applied" and not r.abandoned
                and r.applied_at is not None and r.applied_step is not None]
    by_time.sort()
    times = [t for t, _ in by_time]
    furthest = list(accumulate((step for _, step in by_time), max))

    def step_at(moment: datetime) -> int | None:
        at = bisect.bisect_right(times, _aware(moment))
        return furthest[at - 1] if at else None

    entries = [_command_entry(row, shown.by, step_at)
               for row, shown in zip(rows, public(session, rows), strict=True)]
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
    for checkpoint in checkpoints:
        entries.append(TimelineEntryPublic(
            kind="checkpoint", step=checkpoint.step, time=_aware(checkpoint.created_at),
            title=f"checkpoint (epoch {checkpoint.epoch})",
            detail=f"{checkpoint.size} bytes",
        ))
    entries.sort(key=lambda entry: entry.time)
    return TimelinePublic(job_id=job.id, entries=entries)


def _command_entry(row: JobCommand, who: str,
                   step_at: Callable[[datetime], int | None]) -> TimelineEntryPublic:
    """One command as a timeline row: where it took effect (or was refused), by whom."""
    when = _aware(row.requested_at).strftime("%Y-%m-%d %H:%M:%S UTC")
    step = row.applied_step if row.status == "applied" else step_at(row.requested_at)
    common: dict[str, Any] = {"step": step, "time": _aware(row.applied_at or row.requested_at),
              "command_id": row.id, "command_kind": row.kind, "status": row.status,
              "by": who, "abandoned": bool(row.abandoned)}
    if row.kind == "set_lr":
        requested = f"requested {row.requested_lr:g} ({row.mode}) by {who}"
        if row.status == "applied":
            applied = row.applied_lr if row.applied_lr is not None else row.requested_lr
            return TimelineEntryPublic(kind="lr", title=f"lr {applied:g}", detail=(
                f"{requested} at {when}; applied at step {row.applied_step}"), **common)
        title = "lr change rejected" if row.status == "rejected" else "lr change pending"
        outcome = f"rejected: {row.reason}" if row.status == "rejected" else "pending"
        return TimelineEntryPublic(kind="lr", title=title,
                                   detail=f"{requested} at {when}; {outcome}", **common)
    shown = ", ".join(f"{k}={v}" for k, v in (row.params or {}).items() if v is not None)
    requested = f"{row.kind}{f' ({shown})' if shown else ''} requested by {who} at {when}"
    if row.status == "applied":
        outcome = f"applied at step {row.applied_step}"
    elif row.status == "rejected":
        outcome = f"rejected: {row.reason}"
    else:
        outcome = "pending"
    title = row.kind.replace("_", " ") + ("" if row.status == "applied" else f" {row.status}")
    return TimelineEntryPublic(kind="command", title=title, detail=f"{requested}; {outcome}",
                               **common)


def _abandoned_series(session: Session, *, job_id: str, names: list[str] | None,
                      max_points: int) -> list[MetricSeriesPublic]:
    """The branches rollbacks set aside, one series per (branch, metric), thinned alike."""
    grouped: dict[tuple[int, str], list[tuple[int, float]]] = {}
    for point in repositories.list_abandoned_points(session, job_id=job_id, names=names,
                                                    limit=10_000_000):
        grouped.setdefault((point.branch, point.name), []).append((point.step, point.value))
    series = []
    for (branch, name), rows in sorted(grouped.items()):
        steps = np.array([s for s, _ in rows], dtype=np.int64)
        values = np.array([v for _, v in rows], dtype=np.float64)
        keep = keep_extremes(values, max_points=max_points)
        series.append(MetricSeriesPublic(
            name=name, steps=steps[keep].tolist(), values=values[keep].tolist(),
            total_points=len(values), downsampled=len(keep) < len(values), abandoned=True,
            branch=branch))
    return series
