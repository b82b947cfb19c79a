"""Metric points: batched writes, paged reads and whole columns for charts.

Queries flush and never commit (see core/repositories/__init__.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    and_,
    func,
    or_,
    select,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from core.models import (
    MetricPoint,
    utcnow,
)


@dataclass(frozen=True)
class MetricPointIn:
    step: int
    epoch: int
    name: str
    value: float
    time: datetime | None = None


def add_metric_points(session: Session, *, job_id: str, points: Iterable[MetricPointIn]) -> int:
    """Insert points, ignoring ones already stored (same job, name, step): a resumed
    worker re-sends the steps after its checkpoint and that must not fail."""
    now = utcnow()
    rows = [
        {"job_id": job_id, "step": p.step, "epoch": p.epoch, "name": p.name,
         "value": float(p.value), "time": p.time or now}
        for p in points
    ]
    if not rows:
        return 0
    dialect = session.get_bind().dialect.name
    insert_fn = pg_insert if dialect == "postgresql" else sqlite_insert
    statement = insert_fn(MetricPoint).on_conflict_do_nothing(
        index_elements=["job_id", "name", "step"]
    )
    session.execute(statement, rows)
    session.flush()
    return len(rows)


def list_metric_points(
    session: Session,
    *,
    job_id: str,
    after_step: int | None = None,
    after: tuple[int, str] | None = None,
    names: Sequence[str] | None = None,
    limit: int = 10_000,
) -> list[MetricPoint]:
    """Points ordered by (step, name), the unique key within a job, so ``after`` (the
    (step, name) of the last point already read) resumes exactly where a page ended."""
    query = select(MetricPoint).where(MetricPoint.job_id == job_id)
    if after_step is not None:
        query = query.where(MetricPoint.step > after_step)
    if after is not None:
        step, name = after
        query = query.where(
            or_(
                MetricPoint.step > step,
                and_(MetricPoint.step == step, MetricPoint.name > name),
            )
        )
    if names:
        query = query.where(MetricPoint.name.in_(list(names)))
    query = query.order_by(MetricPoint.step, MetricPoint.name).limit(limit)
    return list(session.scalars(query))


def metric_columns(
    session: Session, *, job_id: str, names: Sequence[str] | None = None
) -> list[tuple[str, int, int, float]]:
    """Every point of a job as bare ``(name, step, epoch, value)`` rows ordered by
    (name, step), for charts that thin 100k points per request.

    SQLAlchemy builds and binds the statement; the driver's cursor fetches the rows,
    because wrapping 100k rows in Row objects costs about three times the query itself.
    """
    query = select(MetricPoint.name, MetricPoint.step, MetricPoint.epoch, MetricPoint.value)
    query = query.where(MetricPoint.job_id == job_id)
    if names:
        query = query.where(MetricPoint.name.in_(list(names)))
    query = query.order_by(MetricPoint.name, MetricPoint.step)
    compiled = query.compile(
        dialect=session.get_bind().dialect, compile_kwargs={"render_postcompile": True}
    )
    params: Any = compiled.params
    if compiled.positional:
        params = tuple(compiled.params[key] for key in compiled.positiontup or ())
    cursor = session.connection().connection.cursor()
    try:
        cursor.execute(str(compiled), params)
        return cast(list[tuple[str, int, int, float]], cursor.fetchall())
    finally:
        cursor.close()


def metric_steps_by_time(session: Session, *, job_id: str) -> list[tuple[datetime, int]]:
    """``(time, step)`` of the last point stored for each step: where a job stood at a
    moment, used to place status changes (which record only a time) on the step axis."""
    query = (
        select(func.max(MetricPoint.time), MetricPoint.step)
        .where(MetricPoint.job_id == job_id)
        .group_by(MetricPoint.step)
        .order_by(MetricPoint.step)
    )
    return [(r[0], r[1]) for r in session.execute(query)]
