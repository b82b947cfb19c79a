"""The schedule after a live learning-rate change, by the engine's own formulas."""

from __future__ import annotations

from core.inspection import Answer, PreviewSchedule, SchedulePreview
from engine import lr_scheduler


def preview_schedule(question: PreviewSchedule) -> Answer:
    scheduler = None
    if question.scheduler is not None:
        try:
            scheduler = lr_scheduler.create(question.scheduler, **question.params)
        except (KeyError, ValueError, TypeError, AssertionError) as exc:
            return Answer(schedule=SchedulePreview(warning=f"cannot preview the schedule: "
                                                           f"{exc}"))
    # With no schedule (or one overridden before) every change is a constant.
    mode = question.mode if scheduler is not None else "override"
    try:
        preview = lr_scheduler.preview_live_change(scheduler, question.step,
                                                   question.learning_rate, mode)
    except ValueError as exc:
        return Answer(schedule=SchedulePreview(warning=str(exc)))
    return Answer(schedule=SchedulePreview(preview=preview.as_dict()))
