from __future__ import annotations

from fastapi import APIRouter, status

from api.deps import CurrentUser, JobDep, SessionDep, StateDep
from api.schemas.learning_rate import (
    LearningRateChangeAccepted,
    LearningRatePublic,
    LearningRateUpdate,
)
from api.services import learning_rate as service

router = APIRouter(prefix="/v1/jobs/{job_id}/learning-rate", tags=["learning rate"])


@router.put("", status_code=status.HTTP_202_ACCEPTED)
def change_learning_rate(
    job: JobDep,
    body: LearningRateUpdate,
    session: SessionDep,
    state: StateDep,
    user: CurrentUser,
) -> LearningRateChangeAccepted:
    """Ask the running job to use a new learning rate from its next step.

    With a scheduler, ``mode: scale`` (default) rescales the schedule so its current value
    becomes the requested one; ``mode: override`` replaces it with a constant. The change
    is confirmed by an ``lr`` event and by ``applied_step`` in ``GET``. ``preview`` shows
    the resulting schedule (factor, peak, final) before the worker applies it.
    """
    change = service.request_change(session, state=state, job=job, user=user, body=body)
    preview, warning = service.preview_change(session, state=state, job=job, body=body)
    return LearningRateChangeAccepted(change_id=change.id, preview=preview, warning=warning)


@router.get("")
def get_learning_rate(job: JobDep, session: SessionDep) -> LearningRatePublic:
    return service.describe(session, job=job)
