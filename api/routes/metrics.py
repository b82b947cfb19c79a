from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import CurrentUser, SessionDep
from api.schemas.metrics import MetricPointPublic, MetricsPublic
from api.services.jobs import load_job
from core import repositories

router = APIRouter(prefix="/v1/jobs/{job_id}/metrics", tags=["metrics"])


@router.get("")
def metric_history(
    job_id: str,
    session: SessionDep,
    user: CurrentUser,
    after_step: Annotated[int | None, Query(ge=-1)] = None,
    names: Annotated[
        list[str] | None,
        Query(description="metric names, e.g. train_loss (repeat or comma-separate)"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 5000,
) -> MetricsPublic:
    """Stored metric points ordered by step; page with ``after_step=next_after_step``."""
    job = load_job(session, job_id=job_id, owner=user)
    wanted = [n.strip() for item in names or [] for n in item.split(",") if n.strip()]
    points = repositories.list_metric_points(
        session, job_id=job.id, after_step=after_step, names=wanted or None, limit=limit + 1
    )
    next_after_step = None
    if len(points) > limit:
        # Never split a step across pages: drop the partial last step.
        last_step = points[limit].step
        points = [p for p in points[:limit] if p.step < last_step]
        next_after_step = points[-1].step if points else None
    return MetricsPublic(
        job_id=job.id,
        points=[
            MetricPointPublic(step=p.step, epoch=p.epoch, name=p.name, value=p.value, time=p.time)
            for p in points
        ],
        next_after_step=next_after_step,
    )
