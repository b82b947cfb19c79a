from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Response, status
from fastapi.concurrency import run_in_threadpool

from api.deps import CurrentUser, JobDep, SessionDep, StateDep
from api.schemas.jobs import JobControlPublic, JobCreate, JobPublic, JobsPublic
from api.services import job_timing
from api.services import jobs as service

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.post("", status_code=status.HTTP_201_CREATED)
async def submit_job(
    body: JobCreate,
    state: StateDep,
    user: CurrentUser,
    response: Response,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> JobPublic:
    """Submit a job spec; the same ``Idempotency-Key`` returns the same job."""
    # The hottest endpoint: all blocking work (DB, commit, enqueue) in one thread hop.
    job, created = await run_in_threadpool(
        service.submit_in_new_session, state=state, owner=user, spec=body,
        idempotency_key=idempotency_key,
    )
    if not created:
        response.headers["Idempotent-Replayed"] = "true"
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    return JobPublic.model_validate(job)


@router.get("")
def list_jobs(
    session: SessionDep,
    state: StateDep,
    user: CurrentUser,
    status_filter: Annotated[
        list[str] | None,
        Query(alias="status", description="one or more statuses (repeat or comma-separate)"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> JobsPublic:
    """The caller's jobs, newest first; pass ``next_cursor`` back as ``cursor``."""
    limit = min(limit, state.settings.limits.max_page_size)
    page, next_cursor = service.list_jobs_page(
        session, owner=user, statuses=service.parse_status_filter(status_filter),
        limit=limit, cursor=cursor,
    )
    # A listing leaves the specs out (GET /v1/jobs/{id} has it).
    return JobsPublic(data=job_timing.jobs_public(session, page), next_cursor=next_cursor)


@router.get("/{job_id}")
def get_job(job: JobDep, session: SessionDep) -> JobPublic:
    return job_timing.job_public(session, job)


@router.post("/{job_id}/pause", status_code=status.HTTP_202_ACCEPTED)
def pause_job(
    job: JobDep, session: SessionDep, state: StateDep, user: CurrentUser
) -> JobControlPublic:
    """Pause: a queued job at once; a running one checkpoints and frees its worker."""
    return service.pause_job(session, state=state, job=job, user=user)


@router.post("/{job_id}/resume", status_code=status.HTTP_202_ACCEPTED)
def resume_job(
    job: JobDep, session: SessionDep, state: StateDep, user: CurrentUser
) -> JobControlPublic:
    """Re-queue a paused job; it continues from its latest checkpoint."""
    return service.resume_job(session, state=state, job=job, user=user)


@router.post("/{job_id}/cancel", status_code=status.HTTP_202_ACCEPTED)
def cancel_job(
    job: JobDep, session: SessionDep, state: StateDep, user: CurrentUser
) -> JobControlPublic:
    return service.cancel_job(session, state=state, job=job, user=user)


@router.delete("/{job_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_job(job: JobDep, session: SessionDep, state: StateDep) -> Response:
    """Delete a finished job (succeeded, failed or cancelled): its history, metrics, LR
    changes and checkpoints (object storage included). 409 for any other status."""
    service.delete_job(session, state=state, job=job)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
