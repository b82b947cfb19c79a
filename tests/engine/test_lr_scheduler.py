"""LR schedulers: MXNet's values (test_optimizer.py L1342-1393), errors, state, registry."""

from __future__ import annotations

import json

import pytest

from engine import lr_scheduler as lrs


def test_factor_scheduler_values_with_constant_warmup() -> None:
    sched = lrs.FactorScheduler(step=100, factor=0.1, stop_factor_lr=1e-4, base_lr=1,
                                warmup_steps=20, warmup_begin_lr=0.1, warmup_mode="constant")
    assert sched(0) == 0.1
    assert sched(10) == 0.1
    assert sched(21) == 1
    assert sched(101) == pytest.approx(0.1)
    assert sched(201) == pytest.approx(0.01)
    assert sched(1000) == pytest.approx(1e-4)


def test_factor_scheduler_decays_at_step_plus_one() -> None:
    sched = lrs.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    assert [sched(n) for n in range(1, 7)] == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]


def test_multifactor_scheduler_values_with_linear_warmup() -> None:
    sched = lrs.MultiFactorScheduler(step=[15, 25], factor=0.1, base_lr=0.1, warmup_steps=10,
                                     warmup_begin_lr=0.05, warmup_mode="linear")
    assert sched(5) == pytest.approx(0.075)
    assert sched(15) == pytest.approx(0.1)
    assert sched(16) == pytest.approx(0.01)
    assert sched(26) == pytest.approx(0.001)


def test_poly_scheduler_values() -> None:
    sched = lrs.PolyScheduler(max_update=1000, base_lr=3, pwr=2, final_lr=0, warmup_steps=100)
    assert sched(50) == pytest.approx(1.5)
    assert sched(100) == pytest.approx(3)
    assert sched(500) < 1.6
    assert sched(1000) == pytest.approx(0)
    assert sched(1500) == pytest.approx(0)  # beyond max_update the last value stays


def test_cosine_scheduler_values() -> None:
    sched = lrs.CosineScheduler(max_update=1000, base_lr=3, final_lr=0.1)
    assert sched(0) == pytest.approx(3)
    assert sched(500) == pytest.approx(0.1 + 2.9 / 2)
    assert sched(1000) == pytest.approx(0.1)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: lrs.FactorScheduler(step=0), "Schedule step must be greater or equal than 1"),
    (lambda: lrs.FactorScheduler(step=1, factor=1.5), "Factor must be no more than 1"),
    (lambda: lrs.MultiFactorScheduler(step=[5, 3]), "increasing integer list"),
    (lambda: lrs.MultiFactorScheduler(step=[0, 3]), "greater or equal than 1"),
    (lambda: lrs.MultiFactorScheduler(step=[2], factor=2), "Factor must be no more than 1"),
    (lambda: lrs.PolyScheduler(max_update=0), "strictly positive"),
    (lambda: lrs.CosineScheduler(max_update=0), "strictly positive"),
    (lambda: lrs.FactorScheduler(step=1, base_lr=0.1, warmup_steps=5, warmup_begin_lr=0.5),
     "Base lr has to be higher than warmup_begin_lr"),
    (lambda: lrs.FactorScheduler(step=1, warmup_steps=-1), "Warmup steps has to be positive"),
    (lambda: lrs.FactorScheduler(step=1, warmup_steps=2, warmup_mode="cubic"),
     "Supports only linear and constant modes of warmup"),
])
def test_bad_arguments_are_refused(make, message) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_non_integer_warmup_steps_is_refused() -> None:
    with pytest.raises(AssertionError):
        lrs.FactorScheduler(step=1, warmup_steps=2.5)


def test_create_by_case_insensitive_name() -> None:
    assert isinstance(lrs.create("Factor", step=3), lrs.FactorScheduler)
    assert isinstance(lrs.create("multifactor", step=[3]), lrs.MultiFactorScheduler)
    assert isinstance(lrs.create("POLY", max_update=3), lrs.PolyScheduler)
    assert isinstance(lrs.create("cosine", max_update=3), lrs.CosineScheduler)
    with pytest.raises(ValueError, match="exponential"):
        lrs.create("exponential")


def test_state_dict_round_trips_through_json() -> None:
    sched = lrs.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    sched(7)
    state = json.loads(json.dumps(sched.state_dict()))
    fresh = lrs.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    fresh.load_state_dict(state)
    assert fresh.base_lr == sched.base_lr == 0.125
    assert fresh(9) == sched(9) == 0.0625
    with pytest.raises(ValueError, match="no state field"):
        fresh.load_state_dict({"bogus": 1})


def test_user_scheduler_subclass_gets_warmup_and_state() -> None:
    class Halving(lrs.LRScheduler):
        def __call__(self, num_update):
            if num_update < self.warmup_steps:
                return self.get_warmup_lr(num_update)
            return self.base_lr / 2 ** num_update

    sched = Halving(base_lr=1.0, warmup_steps=2, warmup_begin_lr=0.0)
    assert sched(1) == 0.5
    assert sched(3) == 0.125
    assert sched.state_dict()["base_lr"] == 1.0


# ------------------------------------------------------------ live-change preview


def _run_optimizer(sched: lrs.LRScheduler, change_at: int, lr: float,
                   steps: list[int]) -> dict[int, float]:
    """The lr the optimizer really uses at ``steps`` after a scale change at ``change_at``."""
    from engine import optimizer

    opt = optimizer.SGD(learning_rate=sched.base_lr, lr_scheduler=sched)
    opt.num_update = change_at
    opt.set_learning_rate(lr, mode="scale")
    seen = {}
    for n in range(change_at + 1, max(steps) + 1):
        opt.num_update = n
        if n in steps:
            seen[n] = opt.learning_rate
    return seen


def test_scale_during_warmup_multiplies_the_rest_and_the_preview_says_so() -> None:
    def cosine() -> lrs.CosineScheduler:
        return lrs.CosineScheduler(max_update=480, base_lr=0.003, warmup_steps=40,
                                   final_lr=1e-5)

    preview = lrs.preview_live_change(cosine(), 30, 0.001)
    assert preview.in_warmup and preview.current_lr == pytest.approx(0.00225)
    assert preview.factor == pytest.approx(0.001 / 0.00225)
    assert preview.peak_step == 40 and preview.final_step == 480
    assert preview.peak_lr == pytest.approx(0.003 * preview.factor)
    assert preview.final_lr == pytest.approx(1e-5 * preview.factor)
    real = _run_optimizer(cosine(), 30, 0.001, [31, 40, 480])
    assert real[31] == pytest.approx(0.001 * 31 / 30)  # the ramp goes on from the new value
    assert real[40] == pytest.approx(preview.peak_lr)
    assert real[480] == pytest.approx(preview.final_lr)


def test_scale_after_warmup_keeps_the_decay_shape() -> None:
    sched = lrs.PolyScheduler(max_update=100, base_lr=1.0, pwr=1, final_lr=0.1)
    preview = lrs.preview_live_change(sched, 50, 0.11)
    assert not preview.in_warmup and preview.current_lr == pytest.approx(0.55)
    assert preview.peak_step == 51 and preview.peak_lr == pytest.approx(0.2 * 0.541)
    assert preview.final_lr == pytest.approx(0.02) and preview.final_step == 100
    assert sched(50) == pytest.approx(0.55)  # the scheduler given was not advanced
    real = _run_optimizer(lrs.PolyScheduler(max_update=100, base_lr=1.0, pwr=1, final_lr=0.1),
                          50, 0.11, [51, 100])
    assert real[51] == pytest.approx(preview.peak_lr)
    assert real[100] == pytest.approx(preview.final_lr)


def test_preview_of_step_schedules_and_override() -> None:
    multi = lrs.preview_live_change(lrs.MultiFactorScheduler(step=[10, 20], factor=0.5,
                                                             base_lr=1.0), 5, 0.1)
    assert (multi.factor, multi.peak_lr, multi.final_step) == (0.1, 0.1, 21)
    assert multi.final_lr == pytest.approx(0.025)
    factor = lrs.preview_live_change(lrs.FactorScheduler(step=10, factor=0.5,
                                                         stop_factor_lr=1e-3, base_lr=1.0),
                                     25, 0.1)
    assert factor.final_step is None and factor.final_lr == pytest.approx(1e-3 * 0.4)
    constant = lrs.preview_live_change(lrs.CosineScheduler(max_update=10), 3, 0.5,
                                       mode="override")
    assert (constant.factor, constant.peak_lr, constant.final_lr) == (None, 0.5, 0.5)


def test_preview_refuses_to_scale_a_zero_learning_rate_like_the_optimizer() -> None:
    sched = lrs.CosineScheduler(max_update=100, base_lr=0.01, warmup_steps=10)
    with pytest.raises(ValueError, match="current learning rate is 0.0"):
        lrs.preview_live_change(sched, 0, 0.001)
    with pytest.raises(ValueError, match="mode"):
        lrs.preview_live_change(sched, 5, 0.001, mode="double")
