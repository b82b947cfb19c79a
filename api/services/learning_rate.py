"""Live learning-rate changes: the ``set_lr`` kind of step-boundary command, with the
learning-rate endpoints' view of it (the schedule preview, the change history)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from api.schemas.learning_rate import (
    LearningRateChangePublic,
    LearningRatePreview,
    LearningRatePublic,
    LearningRateUpdate,
)
from api.services.commands import applied_commands, request_command
from api.services.inspector import InspectionFailed, InspectorUnavailable
from api.state import ServiceState
from core import repositories
from core.commands import SetLRCommand
from core.inspection import PreviewSchedule
from core.jobspec import JobSpec
from core.models import Job, JobCommand, User
from core.steering import hyperparameters_in_effect


def request_change(
    session: Session, *, state: ServiceState, job: Job, user: User, body: LearningRateUpdate
) -> JobCommand:
    command = SetLRCommand(learning_rate=body.learning_rate, mode=body.mode)
    return request_command(session, state=state, job=job, user=user, command=command)


def describe(session: Session, *, job: Job) -> LearningRatePublic:
    """The lr in effect, the schedule, and every change with its outcome."""
    spec = JobSpec.model_validate(job.spec)
    changes = repositories.list_lr_changes(session, job_id=job.id)
    return LearningRatePublic(
        job_id=job.id,
        learning_rate=job.current_lr,
        initial_learning_rate=spec.initial_learning_rate(),
        schedule=spec.lr_scheduler.model_dump(mode="json") if spec.lr_scheduler else None,
        changes=[LearningRateChangePublic.model_validate(c) for c in changes],
    )


def preview_change(
    session: Session, *, state: ServiceState, job: Job, body: LearningRateUpdate
) -> tuple[LearningRatePreview | None, str | None]:
    """The schedule after the change, from the job's spec and last reported step: the
    engine's own schedule formulas (engine.lr_scheduler.preview_live_change) evaluated on
    a fresh scheduler, in the inspector process (the api never loads the engine).
    Returns (preview, warning); the warning is the reason the worker will reject it (the
    optimizer raises the same message)."""
    spec = JobSpec.model_validate(job.spec)
    # The schedule in effect: the spec's, one a set_schedule put in (counted from the
    # step it took effect), or none after an override.
    schedule = hyperparameters_in_effect(spec, applied_commands(session, job), None)["schedule"]
    scheduler, params, offset = None, {}, 0
    if schedule is not None:
        scheduler, params = schedule["type"], dict(schedule["params"])
        params.setdefault("base_lr", spec.initial_learning_rate() or 0.01)
        offset = int(schedule["from_step"]) - 1
    question = PreviewSchedule(scheduler=scheduler, params=params, step=job.step - offset,
                               learning_rate=body.learning_rate, mode=body.mode)
    try:
        answer = state.inspector.check(question).schedule
    except (InspectorUnavailable, InspectionFailed) as exc:
        return None, f"cannot preview the schedule now ({exc})"
    if answer is None or answer.preview is None:
        return None, answer.warning if answer else None
    shown = dict(answer.preview)
    for key in ("peak_step", "final_step"):  # back on the job's own step axis
        if shown.get(key) is not None:
            shown[key] += offset
    return LearningRatePreview(at_step=job.step, **shown), None
