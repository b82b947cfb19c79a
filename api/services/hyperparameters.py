"""``GET /v1/jobs/{id}/hyperparameters``: what a job trains with now, and its changes."""

from __future__ import annotations

from sqlalchemy.orm import Session

from api.schemas.commands import HyperparametersPublic
from api.services.commands import applied_commands, list_public
from core.jobspec import JobSpec
from core.models import Job
from core.steering import hyperparameters_in_effect

# The kinds that change what the job trains with (the others act: evaluate, checkpoint,
# pause, ...; GET /v1/jobs/{id}/commands lists every kind).
CHANGES = frozenset({"set_lr", "set_hyperparameters", "set_schedule", "freeze", "unfreeze",
                     "set_rules"})


def describe(session: Session, *, job: Job) -> HyperparametersPublic:
    spec = JobSpec.model_validate(job.spec)
    names = [str(p["name"]) for p in job.parameters or []]
    effect = hyperparameters_in_effect(spec, applied_commands(session, job), names)
    return HyperparametersPublic(
        job_id=job.id, learning_rate=job.current_lr, optimizer=effect["optimizer"],
        values=effect["values"], schedule=effect["schedule"], frozen=effect["frozen"],
        rules=effect["rules"], changes=list_public(session, job=job, kinds=CHANGES),
    )
