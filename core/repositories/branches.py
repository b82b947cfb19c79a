"""Abandoned branches: the metric points a rollback moved out of a job's live history.

Queries flush and never commit (see core/repositories/__init__.py)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, insert, literal, select, tuple_
from sqlalchemy.orm import Session

from core.models import AbandonedMetricPoint, MetricPoint

_MOVED = ("job_id", "step", "epoch", "name", "value", "time")


def abandon_metric_points(session: Session, *, job_id: str, after_step: int,
                          branch: int) -> int:
    """Move the points after ``after_step`` to the abandoned history as ``branch``, in one
    INSERT ... SELECT and one DELETE; returns how many moved."""
    chosen = select(literal(branch), *(getattr(MetricPoint, c) for c in _MOVED)).where(
        MetricPoint.job_id == job_id, MetricPoint.step > after_step)
    session.execute(insert(AbandonedMetricPoint).from_select(["branch", *_MOVED], chosen))
    moved = session.execute(delete(MetricPoint).where(
        MetricPoint.job_id == job_id, MetricPoint.step > after_step))
    session.flush()
    return int(getattr(moved, "rowcount", 0))


def list_abandoned_points(
    session: Session, *, job_id: str, branch: int | None = None,
    names: Sequence[str] | None = None, limit: int = 10_000,
    after: tuple[int, int, str] | None = None,
) -> list[AbandonedMetricPoint]:
    """Ordered by (branch, step, name); ``after`` is the last (branch, step, name) read."""
    query = select(AbandonedMetricPoint).where(AbandonedMetricPoint.job_id == job_id)
    if branch is not None:
        query = query.where(AbandonedMetricPoint.branch == branch)
    if names:
        query = query.where(AbandonedMetricPoint.name.in_(list(names)))
    if after is not None:
        query = query.where(tuple_(AbandonedMetricPoint.branch, AbandonedMetricPoint.step,
                                   AbandonedMetricPoint.name) > tuple_(*after))
    order = (AbandonedMetricPoint.branch, AbandonedMetricPoint.step, AbandonedMetricPoint.name)
    return list(session.scalars(query.order_by(*order).limit(limit)))
