from __future__ import annotations

from fastapi import APIRouter

from api.deps import JobDep, SessionDep
from api.schemas.dashboard import TimelinePublic
from api.services import dashboard as service

router = APIRouter(prefix="/v1/jobs/{job_id}/timeline", tags=["metrics"])


@router.get("")
def job_timeline(job: JobDep, session: SessionDep) -> TimelinePublic:
    """Runtime changes on the step axis, oldest first: lr changes (applied at
    ``applied_step``, or rejected), pause/resume/restart/end, checkpoints."""
    return service.timeline(session, job=job)
