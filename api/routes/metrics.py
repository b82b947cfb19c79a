from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.cursors import INT64_MAX
from api.deps import JobDep, SessionDep
from api.errors import field_error
from api.schemas.dashboard import MetricSeriesSetPublic
from api.schemas.metrics import MetricPointPublic, MetricsPublic
from api.services import dashboard as dashboard_service
from api.services import metrics as service

router = APIRouter(prefix="/v1/jobs/{job_id}/metrics", tags=["metrics"])


def _names(names: list[str] | None) -> list[str]:
    wanted = [n.strip() for item in names or [] for n in item.split(",") if n.strip()]
    for name in wanted:
        # No metric name has control characters, and PostgreSQL refuses a NUL in a query.
        if not name.isprintable():
            raise field_error("names", f"{name!r} is not a metric name (control characters)")
    return wanted


@router.get("/series")
def metric_series(
    job: JobDep,
    session: SessionDep,
    max_points: Annotated[
        int, Query(ge=16, le=100_000, description="most points returned per metric")
    ] = 2000,
    names: Annotated[
        list[str] | None,
        Query(description="metric names, e.g. train_loss (repeat or comma-separate)"),
    ] = None,
    include_abandoned: Annotated[
        bool, Query(description="also the branches rollbacks set aside (abandoned: true)")
    ] = False,
) -> MetricSeriesSetPublic:
    """Every metric's whole history for a chart, thinned to ``max_points`` per metric.

    Thinning keeps each bucket's first, smallest, largest and last point, so spikes stay
    visible; ``downsampled`` says whether a series was thinned (exact values: the paged
    ``GET /metrics``). ``epochs`` gives the first step of each epoch. With
    ``include_abandoned``, each branch a rollback set aside follows as its own series
    (``abandoned: true``, ``branch: n``).
    """
    return dashboard_service.metric_series(
        session, job_id=job.id, names=_names(names) or None, max_points=max_points,
        include_abandoned=include_abandoned,
    )


@router.get("")
def metric_history(
    job: JobDep,
    session: SessionDep,
    after_step: Annotated[
        int | None, Query(ge=-1, le=INT64_MAX, description="only points with a larger step")
    ] = None,
    cursor: Annotated[
        str | None, Query(max_length=512, description="``next_cursor`` of the previous page")
    ] = None,
    names: Annotated[
        list[str] | None,
        Query(description="metric names, e.g. train_loss (repeat or comma-separate)"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 5000,
) -> MetricsPublic:
    """Stored metric points ordered by (step, name); page with ``cursor=next_cursor``."""
    wanted = _names(names)
    page = service.read_page(
        session, job_id=job.id, after_step=after_step, cursor=cursor,
        names=wanted or None, limit=limit,
    )
    return MetricsPublic(
        job_id=job.id,
        points=[
            MetricPointPublic(step=p.step, epoch=p.epoch, name=p.name, value=p.value, time=p.time)
            for p in page.points
        ],
        next_cursor=page.next_cursor,
        next_after_step=page.next_after_step,
    )
