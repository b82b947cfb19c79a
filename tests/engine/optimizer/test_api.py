"""The Optimizer API around the rules: registry, errors, counts, lr, states, user optimizers."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

import engine as mx
from engine import lr_scheduler, nd
from engine import optimizer as opt


def test_create_is_case_insensitive_and_unknown_names_fail() -> None:
    assert type(opt.create("AdAm")) is opt.Adam
    assert type(opt.create("ccsgd")) is opt.SGD
    with pytest.raises(ValueError, match="Cannot find optimizer adamz"):
        opt.create("adamz")


def test_registering_a_duplicate_name_is_an_error() -> None:
    with pytest.raises(ValueError, match="already registered"):
        @opt.register
        class Adam(opt.Optimizer):  # noqa: F811 - the point of the test
            pass


@pytest.mark.parametrize("lr", [-0.1, float("nan"), float("inf"), "fast"])
def test_bad_learning_rates_are_refused(lr) -> None:
    with pytest.raises(ValueError, match="learning_rate"):
        opt.SGD(learning_rate=lr)
    sgd = opt.SGD(learning_rate=0.1)
    with pytest.raises(ValueError, match="learning_rate"):
        sgd.set_learning_rate(lr)
    with pytest.raises(ValueError, match="learning_rate"):
        sgd.set_learning_rate(0.0)
    assert sgd.learning_rate == 0.1


def test_default_lr_and_scheduler_base_lr_override(caplog) -> None:
    assert opt.Optimizer().learning_rate == 0.01
    with caplog.at_level(logging.WARNING):
        o = opt.Optimizer(lr_scheduler=lr_scheduler.FactorScheduler(1), learning_rate=0.3)
    assert "has been overwritten" in caplog.text
    assert o.learning_rate == 0.3
    o.lr_scheduler.base_lr = 0.4
    assert o.learning_rate == 0.4
    # Adam's default lr overrides the scheduler's base_lr, as in MXNet 1.x.
    adam = opt.Adam(lr_scheduler=lr_scheduler.FactorScheduler(1, base_lr=1.0))
    assert adam.learning_rate == 0.001


def test_num_update_counts_per_device_and_rises_once_per_step() -> None:
    o = opt.SGD(learning_rate=0.1)
    w0, w1 = nd.ones((2,), ctx=mx.cpu(0)), nd.ones((2,), ctx=mx.cpu(1))
    upd = opt.get_updater(o)
    for _ in range(3):
        upd([0, 1], [nd.ones((2,)), nd.ones((2,))], [w0, nd.ones((2,))])
        upd([0, 1], [nd.ones((2,), ctx=mx.cpu(1))] * 2, [w1, nd.ones((2,), ctx=mx.cpu(1))])
    assert o.num_update == 3
    assert o._all_index_update_counts == {0: {0: 3, 1: 3}, 1: {0: 3, 1: 3}}
    later = opt.SGD(begin_num_update=10)
    later.update(0, nd.ones((1,)), nd.ones((1,)), None)
    assert later.num_update == 11


def test_lr_and_wd_multipliers_from_param_dict_dict_and_names() -> None:
    class P:
        lr_mult, wd_mult, name = 2.0, 0.5, "p"

    o = opt.SGD(learning_rate=0.1, wd=0.2, param_dict={0: P()},
                param_idx2name={1: "fc_bias", 2: "fc_weight"})
    o.set_lr_mult({1: 3.0})
    assert o._get_lr(0) == pytest.approx(0.2) and o._get_wd(0) == pytest.approx(0.1)
    assert o._get_lr(1) == pytest.approx(0.3)
    assert o._get_wd(1) == 0.0          # 1.x: idx2name names not ending _weight/_gamma
    assert o._get_wd(2) == pytest.approx(0.2)


def test_set_learning_rate_with_a_scheduler_modes() -> None:
    o = opt.SGD(learning_rate=1.0, lr_scheduler=lr_scheduler.FactorScheduler(2, 0.5))
    with pytest.raises(UserWarning, match="LRScheduler of the optimizer has already"):
        o.set_learning_rate(0.1)
    w = nd.ones((1,))
    for _ in range(3):
        o.update(0, w, nd.zeros((1,)), None)
    assert o.learning_rate == 0.5
    o.set_learning_rate(0.05, mode="scale")
    assert o.learning_rate == pytest.approx(0.05)
    for _ in range(2):
        o.update(0, w, nd.zeros((1,)), None)
    assert o.learning_rate == pytest.approx(0.025)   # the shape continues: halves at n=5
    o.set_learning_rate(0.3, mode="override")
    o.update(0, w, nd.zeros((1,)), None)
    assert o.learning_rate == 0.3 and o._get_lr(0) == 0.3
    o.set_learning_rate(0.2)                          # schedule replaced: plain set works
    assert o.learning_rate == 0.2
    with pytest.raises(ValueError, match="mode"):
        o.set_learning_rate(0.2, mode="sideways")


def test_updater_states_round_trip_without_pickle() -> None:
    o = opt.Adam(learning_rate=0.1)
    upd = opt.get_updater(o)
    w = nd.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    for _ in range(2):
        upd(0, nd.ones((2, 3)), w)
    blob = upd.get_states(dump_optimizer=True)
    with np.load(__import__("io").BytesIO(blob), allow_pickle=False) as archive:
        json.loads(archive["__meta__"].tobytes().decode())
    fresh = opt.get_updater(opt.Adam(learning_rate=0.1))
    fresh.set_states(blob)
    assert fresh.optimizer.num_update == 2
    w2 = w.copy()
    upd(0, nd.ones((2, 3)), w)
    fresh(0, nd.ones((2, 3)), w2)
    assert np.array_equal(w.asnumpy(), w2.asnumpy())
    with pytest.raises(ValueError, match="saved optimizer is 'adam'"):
        opt.get_updater(opt.SGD()).set_states(blob)
    with pytest.raises(ValueError, match="not an optimizer state blob"):
        fresh.set_states(b"garbage")


def test_multi_precision_keeps_fp32_master_weights() -> None:
    o = opt.SGD(learning_rate=0.1, momentum=0.9, multi_precision=True)
    w = nd.array(np.ones(4), dtype=np.float16)
    state = o.create_state_multi_precision(0, w)
    mom, master = state  # MXNet 1.x SGD order: (momentum, weight32)
    assert master.dtype == np.float32 and mom.dtype == np.float32
    for _ in range(3):
        o.update_multi_precision(0, w, nd.array(np.full(4, 1e-3), dtype=np.float16), state)
    assert w.dtype == np.float16
    np.testing.assert_allclose(master.asnumpy(), w.asnumpy(), rtol=1e-3)
    assert master.asnumpy()[0] < 1.0


def test_update_does_not_mutate_the_callers_gradient() -> None:
    for name in ("adadelta", "adam", "sgd"):
        o = opt.create(name, rescale_grad=0.5, clip_gradient=0.1)
        w, g = nd.ones((3,)), nd.array([1.0, -2.0, 3.0])
        o.update(0, w, g, o.create_state(0, w))
        assert g.asnumpy().tolist() == [1.0, -2.0, 3.0], name


@opt.register
class PlainMomentum(opt.Optimizer):
    """A user optimizer written as in MXNet's docs: NDArray code in update()."""

    def __init__(self, momentum=0.5, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum

    def create_state(self, index, weight):
        return nd.zeros(weight.shape, weight.context, dtype=weight.dtype)

    def update(self, index, weight, grad, state):
        self._update_count(index)
        lr = self._get_lr(index)
        state[:] = self.momentum * state + grad * self.rescale_grad
        weight[:] -= lr * state


def test_user_defined_optimizer_is_created_by_name_and_updates() -> None:
    o = opt.create("plainmomentum", learning_rate=0.1)
    assert not o.supports_fused()
    w, s = nd.ones((2,)), nd.zeros((2,))
    o.update(0, w, nd.ones((2,)), s)
    o.update(0, w, nd.ones((2,)), s)
    np.testing.assert_allclose(w.asnumpy(), [1 - 0.1 - 0.15] * 2, rtol=1e-6)


def test_dcasgd_with_momentum_works() -> None:
    o = opt.DCASGD(learning_rate=0.1, momentum=0.9)
    w = nd.ones((2,))
    state = o.create_state(0, w)
    o.update(0, w, nd.ones((2,)), state)
    o.update(0, w, nd.ones((2,)), state)
    assert state[0] is not None and w.asnumpy()[0] < 0.9
