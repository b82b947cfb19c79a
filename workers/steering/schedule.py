"""A schedule put in by a ``set_schedule`` command, counted from the step it took effect.

Engine schedules are functions of the optimizer's update count; a replacement must start
at its own step 1 on the job's next step, so it runs shifted by the update count at the
change. Its state (the offset and the inner schedule's state) is saved with the trainer
state like any schedule's.
"""

from __future__ import annotations

from typing import Any

import engine.lr_scheduler


class ShiftedSchedule:
    """``inner(num_update - offset)``: the replaced schedule as the optimizer sees it.

    >>> inner = engine.lr_scheduler.create("factor", step=1, factor=0.5, base_lr=1.0)
    >>> ShiftedSchedule(inner, offset=100)(102)
    0.5
    """

    def __init__(self, inner: engine.lr_scheduler.LRScheduler, offset: int) -> None:
        self.inner = inner
        self.offset = offset

    @property
    def base_lr(self) -> float:
        return float(self.inner.base_lr)

    def __call__(self, num_update: int) -> float:
        return float(self.inner(max(num_update - self.offset, 0)))

    def state_dict(self) -> dict[str, Any]:
        return {"offset": self.offset, "inner": self.inner.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.offset = int(state["offset"])
        self.inner.load_state_dict(state["inner"])


def build(spec: dict[str, Any]) -> ShiftedSchedule:
    """The schedule a :class:`~workers.steering.state.SteeringState` recorded:
    ``{"type", "params" (with base_lr), "offset"}``."""
    inner = engine.lr_scheduler.create(spec["type"], **spec["params"])
    return ShiftedSchedule(inner, int(spec["offset"]))
