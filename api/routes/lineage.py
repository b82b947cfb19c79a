from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from api.cursors import decode_cursor, encode_cursor
from api.deps import CurrentUser, JobDep, SessionDep, StateDep
from api.schemas.commands import CommandAccepted
from api.schemas.jobs import JobPublic
from api.schemas.lineage import ForkRequest, LineagePublic, RollbackRequest
from api.schemas.metrics import AbandonedPointsPublic
from api.services import lineage as service
from core.commands import RollbackCommand

router = APIRouter(prefix="/v1/jobs/{job_id}", tags=["lineage"])


@router.post("/fork", status_code=status.HTTP_201_CREATED)
def fork_job(job: JobDep, body: ForkRequest, session: SessionDep, state: StateDep,
             user: CurrentUser, response: Response) -> JobPublic:
    """A new job that starts from one of this job's checkpoints (``step``, or the latest)
    with ``overrides``; this job is not touched and may keep running. The child records
    its parent and the step (``GET .../lineage``); steering overrides (optimizer values,
    schedule, rules) are its first commands, the rest its spec. A change that cannot
    continue from the checkpoint (another model or optimizer, another data source) is a
    422 naming the field."""
    child = service.fork(session, state=state, parent=job, user=user, body=body)
    response.headers["Location"] = f"/v1/jobs/{child.id}"
    return JobPublic.model_validate(child)


@router.post("/rollback", status_code=status.HTTP_202_ACCEPTED)
def rollback_job(job: JobDep, body: RollbackRequest, session: SessionDep, state: StateDep,
                 user: CurrentUser) -> CommandAccepted:
    """Rewind a running or paused job to its checkpoint at ``step``: the metric points
    after it are kept as an abandoned branch (``GET .../metrics/abandoned``), later
    checkpoints go, and training continues from that checkpoint exactly as a run stopped
    there and resumed would. A running job does it at its next step boundary (pending
    until the worker confirms it); a paused one at once (applied)."""
    command = RollbackCommand(step=body.step, checkpoint_before=body.checkpoint_before)
    row = service.rollback(session, state=state, job=job, user=user, command=command)
    return CommandAccepted(job_id=job.id, command_id=row.id, kind=row.kind,
                           status=row.status, applied_step=row.applied_step)  # type: ignore[arg-type]


@router.get("/lineage")
def job_lineage(job: JobDep, session: SessionDep) -> LineagePublic:
    return service.lineage(session, job=job)


@router.get("/metrics/abandoned")
def abandoned_metrics(
    job: JobDep,
    session: SessionDep,
    branch: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 5000,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> AbandonedPointsPublic:
    """The metric points rollbacks set aside, ordered by (branch, step, name): branch n is
    what the n-th rollback abandoned. Page with ``cursor=next_cursor``."""
    after = decode_cursor(cursor, (int, int, str)) if cursor else None
    points = service.abandoned_points(session, job=job, branch=branch, limit=limit + 1,
                                      after=after)
    page = points[:limit]
    last = page[-1] if len(points) > limit else None
    return AbandonedPointsPublic.model_validate({
        "job_id": job.id, "points": page,
        "next_cursor": None if last is None else encode_cursor(last.branch, last.step,
                                                               last.name)})
