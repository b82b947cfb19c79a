from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.cursors import INT64_MAX
from api.deps import JobDep, SessionDep
from api.schemas.metrics import MetricPointPublic, MetricsPublic
from api.services import metrics as service

router = APIRouter(prefix="/v1/jobs/{job_id}/metrics", tags=["metrics"])


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
    wanted = [n.strip() for item in names or [] for n in item.split(",") if n.strip()]
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
