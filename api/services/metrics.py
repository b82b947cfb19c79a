"""Metric history pages, read with an exact keyset cursor over (step, name)."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from api.errors import field_error
from core import repositories
from core.models import MetricPoint


@dataclass(frozen=True)
class MetricsPage:
    points: list[MetricPoint]
    next_cursor: str | None
    next_after_step: int | None


def encode_cursor(point: MetricPoint) -> str:
    raw = json.dumps([point.step, point.name]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        step, name = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if type(step) is not int or not isinstance(name, str):
            raise TypeError("cursor fields have the wrong types")
        return step, name
    except (ValueError, TypeError, binascii.Error) as exc:
        message = "is not a cursor returned by this API"
        raise field_error("cursor", message, status_code=400) from exc


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
