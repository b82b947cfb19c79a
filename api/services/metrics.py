"""Metric history pages, read with an exact keyset cursor over (step, name)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from api import cursors
from core import repositories
from core.models import MetricPoint


@dataclass(frozen=True)
class MetricsPage:
    points: list[MetricPoint]
    next_cursor: str | None
    next_after_step: int | None


def encode_cursor(point: MetricPoint) -> str:
    return cursors.encode_cursor(point.step, point.name)


def decode_cursor(cursor: str) -> tuple[int, str]:
    step, name = cursors.decode_cursor(cursor, (int, str))
    return step, name


def read_page(
    session: Session,
    *,
    job_id: str,
    after_step: int | None,
    cursor: str | None,
    names: Sequence[str] | None,
    limit: int,
) -> MetricsPage:
    """Up to ``limit`` points in (step, name) order after ``cursor``.

    ``next_cursor`` resumes exactly after the last point returned, so every point is read
    once even when one step holds more points than ``limit``. A page that would end inside
    a step but also holds earlier steps stops at the last whole step instead: clients that
    page with ``after_step=next_after_step`` (from before the cursor) then lose nothing.
    Only a page filled by a single step's points is cut inside it; its ``next_after_step``
    is None, as that page can only be continued with ``next_cursor``.
    """
    after = decode_cursor(cursor) if cursor else None
    rows = repositories.list_metric_points(
        session, job_id=job_id, after_step=after_step, after=after, names=names,
        limit=limit + 1,
    )
    if len(rows) <= limit:
        return MetricsPage(points=rows, next_cursor=None, next_after_step=None)
    page = rows[:limit]
    last_step = page[-1].step
    ends_inside_step = rows[limit].step == last_step
    if ends_inside_step and page[0].step != last_step:
        page = [p for p in page if p.step != last_step]
        ends_inside_step = False
    return MetricsPage(
        points=page,
        next_cursor=encode_cursor(page[-1]),
        next_after_step=None if ends_inside_step else page[-1].step,
    )
