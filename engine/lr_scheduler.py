"""Learning-rate schedules (``mxnet.lr_scheduler``): MXNet 1.x formulas, messages and state.

A scheduler maps ``num_update`` (1-based, one per optimizer step) to a learning rate. As in
MXNet the schedulers are stateful: Factor/MultiFactor mutate ``base_lr`` as they decay, and
``state_dict()`` / ``load_state_dict()`` (plain JSON data) let a Trainer checkpoint resume them.

>>> from engine import lr_scheduler
>>> sched = lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
>>> [sched(n) for n in (1, 2, 3, 5)]
[1.0, 1.0, 0.5, 0.25]

Any callable ``f(num_update) -> lr`` works as a user schedule; subclass :class:`LRScheduler`
to get warmup and state saving.

Rudder's live learning rate works on any schedule, built-in or user-defined, from the
optimizer side: ``Trainer.set_learning_rate(lr, mode="scale")`` multiplies the schedule's
output from now on so the current lr becomes ``lr`` (the shape continues), and
``mode="override"`` replaces it with the constant ``lr``. The scheduler object itself is
left untouched, and the change is saved with ``Trainer.save_states``.

What ``scale`` means, in warmup and after it: the whole remaining schedule is multiplied
by one factor, ``lr / current`` where ``current`` is the schedule's own value at the
change. After warmup that keeps the decay's shape and moves its end by the same factor.
During warmup the ramp goes on too, so the peak it reaches at ``warmup_steps`` is
multiplied as well: asking 0.001 where the ramp is at 0.0002 makes the factor 5 and the
peak 5 x ``base_lr``. :func:`preview_live_change` says this before the change is made
(the API's ``PUT .../learning-rate`` answer shows it); ``override`` is the choice for
"this value, constant, from now on".
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from .registry import Registry

_REGISTRY = Registry("lr_scheduler")
register = _REGISTRY.register


def create(name: str, **kwargs: Any) -> LRScheduler:
    """A scheduler by registered name (``factor``, ``multifactor``, ``poly``, ``cosine``)."""
    return _REGISTRY.create(name, **kwargs)


class LRScheduler:
    """Base class: warmup handling and the mutable ``base_lr``.

    Subclasses implement ``__call__(num_update)``. ``warmup_final_lr`` is frozen at
    construction, as in MXNet.

    >>> class Halving(LRScheduler):
    ...     def __call__(self, num_update):
    ...         return self.base_lr / 2 ** num_update
    >>> Halving(base_lr=1.0)(2)
    0.25
    """

    def __init__(self, base_lr: float = 0.01, warmup_steps: int = 0,
                 warmup_begin_lr: float = 0, warmup_mode: str = "linear") -> None:
        self.base_lr = base_lr
        if not isinstance(warmup_steps, int) or isinstance(warmup_steps, bool):
            raise AssertionError("warmup_steps must be an integer")
        self.warmup_steps = warmup_steps
        self.warmup_final_lr = base_lr
        self.warmup_begin_lr = warmup_begin_lr
        if self.warmup_begin_lr > self.warmup_final_lr:
            raise ValueError("Base lr has to be higher than warmup_begin_lr")
        if self.warmup_steps < 0:
            raise ValueError("Warmup steps has to be positive or 0")
        if warmup_mode not in ("linear", "constant"):
            raise ValueError("Supports only linear and constant modes of warmup")
        self.warmup_mode = warmup_mode

    def get_warmup_lr(self, num_update: int) -> float:
        assert num_update < self.warmup_steps
        if self.warmup_mode == "linear":
            increase = (self.warmup_final_lr - self.warmup_begin_lr) \
                * float(num_update) / float(self.warmup_steps)
            return self.warmup_begin_lr + increase
        return self.warmup_begin_lr

    def __call__(self, num_update: int) -> float:
        raise NotImplementedError("must override this")

    # Checkpointing: every attribute is a number, string, bool or list of numbers.
    def state_dict(self) -> dict[str, Any]:
        """The scheduler's mutable state as JSON-able data (for ``Trainer.save_states``)."""
        return {key: (list(value) if isinstance(value, tuple) else value)
                for key, value in vars(self).items() if _plain(value)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (unknown keys are refused)."""
        unknown = sorted(set(state) - set(vars(self)))
        if unknown:
            raise ValueError(f"{type(self).__name__} has no state field(s) {unknown}")
        for key, value in state.items():
            setattr(self, key, value)


def _plain(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    return isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) for v in value)


@register(name="factor")
class FactorScheduler(LRScheduler):
    """``lr = base_lr * factor ** ceil(n / step - 1)``, floored at ``stop_factor_lr``.

    The first decay happens at ``n = step + 1`` and the count starts at 0 during warmup
    (MXNet 1.x behaviour, kept for identical numbers).

    >>> FactorScheduler(step=10, factor=0.1, base_lr=1.0)(11)
    0.1
    """

    def __init__(self, step: int, factor: float = 1, stop_factor_lr: float = 1e-8,
                 base_lr: float = 0.01, warmup_steps: int = 0, warmup_begin_lr: float = 0,
                 warmup_mode: str = "linear") -> None:
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if step < 1:
            raise ValueError("Schedule step must be greater or equal than 1 round")
        if factor > 1.0:
            raise ValueError("Factor must be no more than 1 to make lr reduce")
        self.step = step
        self.factor = factor
        self.stop_factor_lr = stop_factor_lr
        self.count = 0

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        # Catch up across skipped updates in one call, like MXNet.
        while num_update > self.count + self.step:
            self.count += self.step
            self.base_lr *= self.factor
            if self.base_lr < self.stop_factor_lr:
                self.base_lr = self.stop_factor_lr
                logging.info("Update[%d]: now learning rate arrived at %0.5e, will not "
                             "change in the future", num_update, self.base_lr)
            else:
                logging.info("Update[%d]: Change learning rate to %0.5e",
                             num_update, self.base_lr)
        return self.base_lr


@register(name="multifactor")
class MultiFactorScheduler(LRScheduler):
    """Multiply by ``factor`` once after each step in the increasing list ``step``.

    >>> s = MultiFactorScheduler(step=[2, 4], factor=0.5, base_lr=1.0)
    >>> [s(n) for n in (2, 3, 5)]
    [1.0, 0.5, 0.25]
    """

    def __init__(self, step: list[int], factor: float = 1, base_lr: float = 0.01,
                 warmup_steps: int = 0, warmup_begin_lr: float = 0,
                 warmup_mode: str = "linear") -> None:
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not isinstance(step, (list, tuple)) or len(step) < 1:
            raise ValueError("Schedule step must be an increasing integer list")
        for i, _step in enumerate(step):
            if i != 0 and step[i] <= step[i - 1]:
                raise ValueError("Schedule step must be an increasing integer list")
            if _step < 1:
                raise ValueError("Schedule step must be greater or equal than 1 round")
        if factor > 1.0:
            raise ValueError("Factor must be no more than 1 to make lr reduce")
        self.step = list(step)
        self.cur_step_ind = 0
        self.factor = factor
        self.count = 0

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while self.cur_step_ind <= len(self.step) - 1:
            if num_update > self.step[self.cur_step_ind]:
                self.count = self.step[self.cur_step_ind]
                self.cur_step_ind += 1
                self.base_lr *= self.factor
                logging.info("Update[%d]: Change learning rate to %0.5e",
                             num_update, self.base_lr)
            else:
                return self.base_lr
        return self.base_lr


@register(name="poly")
class PolyScheduler(LRScheduler):
    """``final + (base - final) * (1 - (n - W) / (M - W)) ** pwr`` for ``W <= n <= M``.

    Beyond ``max_update`` the last value is kept. ``base_lr`` used by the formula is the
    value at construction (``base_lr_orig``), as in MXNet.

    >>> PolyScheduler(max_update=10, base_lr=1.0, pwr=1)(5)
    0.5
    """

    def __init__(self, max_update: int, base_lr: float = 0.01, pwr: float = 2,
                 final_lr: float = 0, warmup_steps: int = 0, warmup_begin_lr: float = 0,
                 warmup_mode: str = "linear") -> None:
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not isinstance(max_update, int) or max_update < 1:
            raise ValueError("maximum number of updates must be strictly positive")
        self.power = pwr
        self.base_lr_orig = self.base_lr
        self.max_update = max_update
        self.final_lr = final_lr
        self.max_steps = self.max_update - self.warmup_steps

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if num_update <= self.max_update:
            self.base_lr = self.final_lr + (self.base_lr_orig - self.final_lr) * pow(
                1 - float(num_update - self.warmup_steps) / float(self.max_steps), self.power)
        return self.base_lr


@register(name="cosine")
class CosineScheduler(LRScheduler):
    """``final + (base - final) * (1 + cos(pi * (n - W) / (M - W))) / 2`` for ``n <= M``.

    >>> CosineScheduler(max_update=10, base_lr=1.0, final_lr=0.0)(10)
    0.0
    """

    def __init__(self, max_update: int, base_lr: float = 0.01, final_lr: float = 0,
                 warmup_steps: int = 0, warmup_begin_lr: float = 0,
                 warmup_mode: str = "linear") -> None:
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not isinstance(max_update, int) or max_update < 1:
            raise ValueError("maximum number of updates must be strictly positive")
        self.base_lr_orig = base_lr
        self.max_update = max_update
        self.final_lr = final_lr
        self.max_steps = self.max_update - self.warmup_steps

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if num_update <= self.max_update:
            self.base_lr = self.final_lr + (self.base_lr_orig - self.final_lr) * (
                1 + math.cos(math.pi * (num_update - self.warmup_steps) / self.max_steps)) / 2
        return self.base_lr


# ------------------------------------------------------------------ live-change preview


@dataclass(frozen=True)
class LiveChangePreview:
    """What a live learning-rate change will do to the rest of the schedule.

    ``factor`` multiplies the schedule from the change on (``None`` for a constant);
    ``peak_lr`` is the largest value still to come and ``peak_step`` the update where it
    is reached; ``final_lr`` is the value the schedule ends on at ``final_step`` (``None``
    when the schedule never ends, as a factor decay floored at ``stop_factor_lr``).
    """

    mode: str
    requested_lr: float
    current_lr: float
    factor: float | None
    in_warmup: bool
    warmup_steps: int
    peak_lr: float
    peak_step: int
    final_lr: float
    final_step: int | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def schedule_end(scheduler: Callable[[int], float]) -> int | None:
    """The update after which a built-in schedule stays constant (None: it never does)."""
    if isinstance(scheduler, PolyScheduler | CosineScheduler):
        return scheduler.max_update
    if isinstance(scheduler, MultiFactorScheduler):
        return scheduler.step[-1] + 1
    return None  # a factor decay (floored at stop_factor_lr) or a user's callable


def preview_live_change(scheduler: Callable[[int], float] | None, num_update: int,
                        lr: float, mode: str = "scale") -> LiveChangePreview:
    """Preview ``set_learning_rate(lr, mode)`` made after ``num_update`` updates.

    The scheduler is not touched (a copy is evaluated). ``scale`` on a schedule whose
    current value is 0 (the first step of a warmup from 0) cannot be done: ValueError,
    the same message the optimizer gives.

    >>> sched = CosineScheduler(max_update=100, base_lr=0.01, warmup_steps=40)
    >>> p = preview_live_change(sched, 20, 0.001)
    >>> p.factor, p.in_warmup, p.peak_step, round(p.peak_lr, 6), p.final_step
    (0.2, True, 40, 0.002, 100)
    """
    if mode not in ("scale", "override"):
        raise ValueError(f"mode must be 'scale' or 'override', got {mode!r}")
    warmup = int(getattr(scheduler, "warmup_steps", 0) or 0)
    in_warmup = num_update < warmup
    if scheduler is None or mode == "override":
        return LiveChangePreview(mode, lr, lr, None, in_warmup, warmup, lr, num_update + 1,
                                 lr, None)
    trial = copy.deepcopy(scheduler)
    current = float(trial(num_update))
    if not current > 0 or not math.isfinite(current):
        raise ValueError(f"cannot scale a schedule whose current learning rate is {current}")
    factor = lr / current
    end = schedule_end(scheduler)
    # Built-in schedules only rise during warmup and are monotonic after it, so the peak
    # is at the next update, at the end of the warmup, or at the end of the schedule.
    candidates = sorted({num_update + 1, warmup, end or num_update + 1} - {0})
    candidates = [n for n in candidates if n > num_update]
    values = {n: float(trial(n)) for n in candidates}
    peak_step = max(candidates, key=lambda n: (values[n], -n))
    if end is None:
        final_step, final_raw = None, _never_ending_final(trial, values[candidates[-1]])
    else:
        final_step, final_raw = max(end, num_update + 1), values[max(end, num_update + 1)]
    return LiveChangePreview(mode, lr, current, factor, in_warmup, warmup,
                             values[peak_step] * factor, peak_step, final_raw * factor,
                             final_step)


def _never_ending_final(scheduler: Callable[[int], float], last_seen: float) -> float:
    """A factor decay ends on its floor; an unknown callable on its last value seen."""
    if isinstance(scheduler, FactorScheduler) and scheduler.factor < 1:
        return min(last_seen, scheduler.stop_factor_lr)
    return last_seen
