from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path, status

from api.deps import CurrentUser, JobDep, SessionDep, StateDep
from api.schemas.commands import (
    CommandAccepted,
    CommandPublic,
    CommandRequest,
    CommandsPublic,
    HyperparametersPublic,
)
from api.services import commands as service
from api.services import hyperparameters

router = APIRouter(prefix="/v1/jobs/{job_id}", tags=["steering"])


@router.post("/commands", status_code=status.HTTP_202_ACCEPTED)
def send_command(
    job: JobDep,
    body: Annotated[CommandRequest, Body()],
    session: SessionDep,
    state: StateDep,
    user: CurrentUser,
) -> CommandAccepted:
    """Steer the job at its next step boundary: ``set_hyperparameters`` (wd, momentum,
    beta1, beta2, epsilon, clip_gradient: those of the job's optimizer), ``set_schedule``
    (replace the lr schedule), ``set_lr`` (scale or override it), ``freeze`` /
    ``unfreeze`` (parameters whose names match ``pattern``), ``evaluate``, ``checkpoint``,
    ``set_rules``, ``rollback``. ``checkpoint_before: true`` takes a checkpoint at the
    step before it applies. Validated against the job's optimizer and model (422 naming
    the field), rate-limited (429), recorded with who and when; the worker confirms it
    with the step it took effect from (``GET .../commands/{command_id}``, or a
    ``command`` / ``lr`` event), or rejects it with the reason. A queued or paused job
    applies it when it next starts."""
    row = service.request_command(session, state=state, job=job, user=user, command=body)
    return CommandAccepted(job_id=job.id, command_id=row.id, kind=row.kind,
                           status=row.status, applied_step=row.applied_step)  # type: ignore[arg-type]


@router.get("/commands")
def list_commands(job: JobDep, session: SessionDep) -> CommandsPublic:
    """Every command of the job, oldest first: who asked (a user, a rule or a fork), when,
    and how it ended (the step it applied from, or the reason it was rejected)."""
    return CommandsPublic(job_id=job.id, data=service.list_public(session, job=job))


@router.get("/commands/{command_id}")
def get_command(
    job: JobDep, session: SessionDep,
    command_id: Annotated[str, Path(max_length=64)],
) -> CommandPublic:
    return service.get_command(session, job=job, command_id=command_id)


@router.get("/hyperparameters")
def get_hyperparameters(job: JobDep, session: SessionDep) -> HyperparametersPublic:
    """What the job trains with now (the spec folded with every applied change) and every
    change of the learning rate, hyperparameters, schedule, frozen parameters and rules
    with the step it took effect from."""
    return hyperparameters.describe(session, job=job)
