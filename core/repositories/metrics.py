"""Metric points: batched writes, paged reads and whole columns for charts.

Queries flush and never commit (see core/repositories/__init__.py)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import (
    Select,
    and_,
    func,
    or_,
    select,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by
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


@dataclass(frozen=True)
class MetricColumns:
    """One metric's whole history as columns, ordered by step."""

    name: str
    steps: NDArray[np.int64]
    epochs: NDArray[np.int64]
    values: NDArray[np.float64]


_ROW_DTYPE = np.dtype([("step", np.int64), ("epoch", np.int64), ("value", np.float64)])


def metric_columns(
    session: Session, *, job_id: str, names: Sequence[str] | None = None
) -> list[MetricColumns]:
    """Every point of a job as per-metric numpy columns ordered by (name, step), for
    charts that thin 100k points per request.

    Turning 100k rows into Python tuples and back into arrays cost more than the query,
    so PostgreSQL aggregates each metric into arrays and sends them over a binary cursor
    (five rows, no per-point text parsing); SQLite's rows go straight into a structured
    array with ``numpy.fromiter``.
    """
    if session.get_bind().dialect.name == "postgresql":
        return _columns_postgresql(session, job_id=job_id, names=names)
    counts: dict[str, int] = {
        name: count
        for name, count in session.execute(
            select(MetricPoint.name, func.count())
            .where(MetricPoint.job_id == job_id)
            .group_by(MetricPoint.name)
        )
    }
    columns: list[MetricColumns] = []
    for name in sorted(n for n in counts if not names or n in names):
        query = (
            select(MetricPoint.step, MetricPoint.epoch, MetricPoint.value)
            .where(MetricPoint.job_id == job_id, MetricPoint.name == name)
            .order_by(MetricPoint.step)
        )
        with _driver_cursor(session, query) as cursor:
            table = np.fromiter(cursor, dtype=_ROW_DTYPE, count=counts[name])
        columns.append(MetricColumns(
            name=name, steps=table["step"], epochs=table["epoch"], values=table["value"],
        ))
    return columns


@contextmanager
def _driver_cursor(
    session: Session, query: Select[*tuple[Any, ...]], **options: Any
) -> Iterator[Any]:
    """Run ``query`` on the DB-API driver's own cursor: SQLAlchemy builds and binds the
    statement, but wrapping 100k rows in Row objects would cost more than the query."""
    compiled = query.compile(
        dialect=session.get_bind().dialect, compile_kwargs={"render_postcompile": True}
    )
    params: Any = compiled.params
    if compiled.positional:
        params = tuple(compiled.params[key] for key in compiled.positiontup or ())
    driver_connection: Any = session.connection().connection.driver_connection
    cursor = driver_connection.cursor(**options)
    try:
        cursor.execute(str(compiled), params)
        yield cursor
    finally:
        cursor.close()


def _columns_postgresql(
    session: Session, *, job_id: str, names: Sequence[str] | None
) -> list[MetricColumns]:
    query = select(
        MetricPoint.name,
        func.array_agg(aggregate_order_by(MetricPoint.step, MetricPoint.step)),
        func.array_agg(aggregate_order_by(MetricPoint.epoch, MetricPoint.step)),
        func.array_agg(aggregate_order_by(MetricPoint.value, MetricPoint.step)),
    ).where(MetricPoint.job_id == job_id)
    if names:
        query = query.where(MetricPoint.name.in_(list(names)))
    query = query.group_by(MetricPoint.name).order_by(MetricPoint.name)
    # psycopg decodes a binary cursor's float8[]/int8[] in C; text arrays parse per element.
    with _driver_cursor(session, query, binary=True) as cursor:
        return [
            MetricColumns(
                name=name,
                steps=np.asarray(steps, dtype=np.int64),
                epochs=np.asarray(epochs, dtype=np.int64),
                values=np.asarray(values, dtype=np.float64),
            )
            for name, steps, epochs, values in cursor.fetchall()
        ]


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


def latest_step_times(session: Session, *, job_id: str,
                      limit: int = 2000) -> list[tuple[datetime, int]]:
    """``(time, step)`` of the job's last ``limit`` points by step, newest first: its
    recent pace, read through the (job, step) index without scanning its history."""
    query = (
        select(MetricPoint.time, MetricPoint.step)
        .where(MetricPoint.job_id == job_id)
        .order_by(MetricPoint.step.desc())
        .limit(limit)
    )
    return [(r[0], r[1]) for r in session.execute(query)]


def sampled_step_times(session: Session, *, job_id: str, name: str,
                       max_points: int) -> list[tuple[datetime, int]]:
    """``(time, step)`` of about ``max_points`` evenly spaced points of one metric (its
    first and last kept), by step: when the job reached each step, for time axes."""
    total = session.scalar(select(func.count()).where(
        MetricPoint.job_id == job_id, MetricPoint.name == name)) or 0
    every = max(1, -(-total // max(1, max_points - 1)))
    numbered = (
        select(MetricPoint.time, MetricPoint.step,
               func.row_number().over(order_by=MetricPoint.step).label("n"))
        .where(MetricPoint.job_id == job_id, MetricPoint.name == name)
        .subquery()
    )
    query = (select(numbered.c.time, numbered.c.step)
             .where(or_((numbered.c.n - 1) % every == 0, numbered.c.n == total))
             .order_by(numbered.c.step))
    return [(r[0], r[1]) for r in session.execute(query)]


def step_times_since(session: Session, *, job_id: str,
                     since: datetime) -> list[tuple[datetime, int]]:
    """``(time, step)`` of each step reported at or after ``since``, by step (a worker's
    pace over the System view's hour)."""
    query = (
        select(func.max(MetricPoint.time), MetricPoint.step)
        .where(MetricPoint.job_id == job_id, MetricPoint.time >= since)
        .group_by(MetricPoint.step)
        .order_by(MetricPoint.step)
    )
    return [(r[0], r[1]) for r in session.execute(query)]
