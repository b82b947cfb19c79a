"""gluon.Trainer semantics (mirrors MXNet's test_gluon_trainer.py) plus Rudder's additions."""

from __future__ import annotations

import io

import numpy as np
import pytest

import engine as mx
from engine import autograd, gluon, kvstore, lr_scheduler, nd
from engine import optimizer as opt

TWO = [mx.cpu(0), mx.cpu(1)]


def _param(name="x", shape=(10,), ctx=TWO, init="zeros", **kw):
    p = gluon.Parameter(name, shape=shape, **kw)
    p.initialize(ctx=ctx, init=init)
    return p


def _backward_plus_one(*params) -> None:
    """y = w + 1 on every context (d/dw = 1 per context)."""
    heads = []
    with autograd.record():
        for p in params:
            heads += [(w + 1).sum() for w in p.list_data()]
    autograd.backward(heads)


@pytest.mark.parametrize("update_on_kvstore", [None, True, False])
def test_two_contexts_sum_gradients_momentum_and_lr_mult(update_on_kvstore) -> None:
    x = _param()
    trainer = gluon.Trainer([x], "sgd", {"learning_rate": 1.0, "momentum": 0.5},
                            update_on_kvstore=update_on_kvstore)
    _backward_plus_one(x)
    trainer.step(1)
    assert trainer._update_on_kvstore is (update_on_kvstore is not False)
    for ctx in TWO:
        assert (x.data(ctx).asnumpy() == -2).all()
    x.lr_mult = 0.5
    _backward_plus_one(x)
    trainer.step(1)
    for ctx in TWO:
        assert (x.data(ctx).asnumpy() == -4).all()


def test_update_and_allreduce_are_refused_when_updating_on_kvstore() -> None:
    x = _param()
    trainer = gluon.Trainer([x], "sgd", {"learning_rate": 1.0})
    _backward_plus_one(x)
    with pytest.raises(AssertionError, match=r"update\(\) when parameters are updated on kvstore"):
        trainer.update(1)
    with pytest.raises(AssertionError, match=r"allreduce_grads\(\) when parameters"):
        trainer.allreduce_grads()


def test_allreduce_grads_then_update_equalizes_contexts() -> None:
    x = _param()
    trainer = gluon.Trainer([x], "sgd", {"learning_rate": 0.5}, update_on_kvstore=False)
    heads = []
    with autograd.record():
        for k, w in enumerate(x.list_data()):
            heads.append((w * (k + 1)).sum())
    autograd.backward(heads)
    trainer.allreduce_grads()
    grads = [g.asnumpy() for g in x.list_grad()]
    assert np.array_equal(grads[0], grads[1]) and (grads[0] == 3).all()
    trainer.update(1)
    assert (x.data(mx.cpu(1)).asnumpy() == -1.5).all()


def test_teststore_cannot_update_on_kvstore() -> None:
    x = _param()
    trainer = gluon.Trainer([x], "sgd", {"learning_rate": 1.0},
                            kvstore=kvstore.create("teststore"))
    _backward_plus_one(x)
    trainer.step(1)
    assert trainer._update_on_kvstore is False
    assert (x.data().asnumpy() == -2).all()
    bad = gluon.Trainer([x], "sgd", kvstore=kvstore.create("teststore"), update_on_kvstore=True)
    with pytest.raises(ValueError, match="Please set update_on_kvstore=False"):
        bad.step(1)


def test_parameters_from_a_dict_are_keyed_in_sorted_order() -> None:
    params = {name: _param(name, ctx=[mx.cpu()]) for name in ("c", "a", "b")}
    trainer = gluon.Trainer(params, "sgd")
    assert [p.name for p in trainer._params] == ["a", "b", "c"]
    assert trainer._param2idx == {"a": 0, "b": 1, "c": 2}


@pytest.mark.parametrize("update_on_kvstore", [True, False])
def test_factor_scheduler_learning_rate_after_steps(update_on_kvstore) -> None:
    x = _param()
    sched = lr_scheduler.FactorScheduler(2, factor=0.1, base_lr=1)
    trainer = gluon.Trainer([x], "sgd", {"learning_rate": 1, "lr_scheduler": sched},
                            update_on_kvstore=update_on_kvstore)
    lr = 1.0
    for i in range(10):
        _backward_plus_one(x)
        trainer.step(1)
        if i % 2 == 0:
            assert trainer.learning_rate == lr, (i, trainer.learning_rate)
            lr *= 0.1


def test_stale_gradient_raises_and_ignore_stale_grad_skips() -> None:
    used, unused = _param("used", ctx=[mx.cpu()]), _param("unused", ctx=[mx.cpu()])
    trainer = gluon.Trainer([used, unused], "sgd", {"learning_rate": 1.0})
    _backward_plus_one(used)
    with pytest.raises(UserWarning, match="Gradient of Parameter `unused` on context cpu"):
        trainer.step(1)
    assert (used.data().asnumpy() == 0).all()  # nothing was applied
    trainer.step(1, ignore_stale_grad=True)
    assert (used.data().asnumpy() == -1).all() and (unused.data().asnumpy() == 0).all()
    with pytest.raises(UserWarning, match="has not been updated by backward since last"):
        trainer.step(1)  # the used gradient is stale now too


def test_stale_check_also_runs_when_updating_on_kvstore() -> None:
    used, unused = _param("used"), _param("unused")
    trainer = gluon.Trainer([used, unused], "sgd", {"learning_rate": 1.0})
    _backward_plus_one(used)
    with pytest.raises(UserWarning, match="`unused`"):
        trainer.step(1)
    trainer.step(1, ignore_stale_grad=True)
    assert (used.data(mx.cpu(1)).asnumpy() == -2).all()
    assert (unused.data(mx.cpu(1)).asnumpy() == 0).all()


def test_constructor_errors() -> None:
    x = _param(ctx=[mx.cpu()])
    with pytest.raises(ValueError, match="First argument must be a list or dict of Parameters"):
        gluon.Trainer(x, "sgd")
    with pytest.raises(ValueError, match="got list of"):
        gluon.Trainer([x, 3], "sgd")
    with pytest.raises(AssertionError, match="optimizer_params must be None"):
        gluon.Trainer([x], opt.SGD(), {"learning_rate": 0.1})
    with pytest.raises(ValueError, match="Cannot find optimizer"):
        gluon.Trainer([x], "nonsense")
    with pytest.raises(ValueError, match="learning_rate"):
        gluon.Trainer([x], "sgd", {"learning_rate": -1.0})
    y = _param("y", ctx=TWO)
    with pytest.raises(AssertionError, match="same set of contexts"):
        gluon.Trainer([x, y], "sgd")
    with pytest.raises(RuntimeError, match="has not been initialized"):
        gluon.Trainer([gluon.Parameter("z", shape=(2,))], "sgd")
    with pytest.raises(ValueError, match="batch_size"):
        gluon.Trainer([x], "sgd").step(0)


def _adam_run(steps: int, params=None, trainer=None, grads=None):
    rng = np.random.default_rng(0)
    if params is None:
        params = [_param("w", (4, 3), [mx.cpu()], init="ones"),
                  _param("b", (3,), [mx.cpu()], init="ones")]
    if trainer is None:
        trainer = gluon.Trainer(params, "adam", {"learning_rate": 0.05, "wd": 0.01})
    targets = grads if grads is not None else [rng.standard_normal((4, 3)).astype(np.float32)
                                               for _ in range(6)]
    return params, trainer, targets


def _adam_steps(params, trainer, targets, start, stop) -> None:
    w, b = params
    for k in range(start, stop):
        with autograd.record():
            loss = (w.data() * nd.array(targets[k])).sum() + (b.data() * b.data()).sum()
        loss.backward()
        trainer.step(2)


@pytest.mark.parametrize("as_file", [False, True])
def test_adam_saved_at_step_3_resumes_exactly(tmp_path, as_file) -> None:
    params, trainer, targets = _adam_run(6)
    _adam_steps(params, trainer, targets, 0, 6)
    uninterrupted = [p.data().asnumpy() for p in params]

    params, trainer, _ = _adam_run(3)
    _adam_steps(params, trainer, targets, 0, 3)
    saved_weights = [p.data().asnumpy() for p in params]
    target = io.BytesIO() if as_file else str(tmp_path / "trainer.states")
    trainer.save_states(target)
    if as_file:
        target.seek(0)

    fresh = [_param("w", (4, 3), [mx.cpu()]), _param("b", (3,), [mx.cpu()])]
    for p, value in zip(fresh, saved_weights, strict=True):
        p.set_data(nd.array(value))
    resumed = gluon.Trainer(fresh, "adam", {"learning_rate": 0.05, "wd": 0.01})
    resumed.load_states(target)
    assert resumed._optimizer.num_update == 3
    _adam_steps(fresh, resumed, targets, 3, 6)
    for got, want in zip(fresh, uninterrupted, strict=True):
        assert np.array_equal(got.data().asnumpy(), want)


def test_load_into_a_trainer_that_already_stepped_keeps_flat_buffers(tmp_path) -> None:
    params, trainer, targets = _adam_run(6)
    _adam_steps(params, trainer, targets, 0, 2)
    trainer.save_states(str(tmp_path / "s"))
    _adam_steps(params, trainer, targets, 2, 4)
    trainer.load_states(str(tmp_path / "s"))
    assert trainer._optimizer.num_update == 2
    group = trainer._groups[0][1]
    m0 = trainer._updaters[0].states[0][0]
    assert m0.raw.base is group.state[0]


def test_corrupt_or_mismatched_states_are_refused_and_change_nothing(tmp_path) -> None:
    params, trainer, targets = _adam_run(6)
    _adam_steps(params, trainer, targets, 0, 2)
    good = str(tmp_path / "good")
    trainer.save_states(good)
    before = trainer._optimizer.state_dict()
    m_before = trainer._updaters[0].states[0][0].asnumpy()

    (tmp_path / "junk").write_bytes(b"not an archive")
    with pytest.raises(ValueError, match="corrupt or wrong format"):
        trainer.load_states(str(tmp_path / "junk"))

    other = gluon.Trainer([_param("w", (4, 3), [mx.cpu()])], "adam")
    with pytest.raises(ValueError, match="2 parameters, this trainer has 1"):
        other.load_states(good)
    shaped = gluon.Trainer([_param("w", (4, 2), [mx.cpu()]), _param("b", (3,), [mx.cpu()])],
                           "adam")
    with pytest.raises(ValueError, match="shape"):
        shaped.load_states(good)
    sgd = gluon.Trainer([_param("w", (4, 3), [mx.cpu()]), _param("b", (3,), [mx.cpu()])],
                        "sgd")
    with pytest.raises(ValueError, match="saved optimizer is 'adam'"):
        sgd.load_states(good)
    assert trainer._optimizer.state_dict() == before
    assert np.array_equal(trainer._updaters[0].states[0][0].asnumpy(), m_before)


@pytest.mark.parametrize("update_on_kvstore", [True, False])
def test_live_learning_rate_modes_reach_the_update(update_on_kvstore) -> None:
    x = _param()
    sched = lr_scheduler.FactorScheduler(1, factor=0.5, base_lr=1.0)
    trainer = gluon.Trainer([x], "sgd", {"learning_rate": 1.0, "lr_scheduler": sched},
                            update_on_kvstore=update_on_kvstore)
    _backward_plus_one(x)
    trainer.step(1)                               # lr 1 → w = -2
    with pytest.raises(UserWarning, match="LRScheduler of the optimizer has already"):
        trainer.set_learning_rate(0.1)
    trainer.set_learning_rate(0.1, mode="scale")  # schedule ×0.1 from now on
    assert trainer.learning_rate == pytest.approx(0.1)
    _backward_plus_one(x)
    trainer.step(1)                               # next scheduled lr 0.5 × 0.1 = 0.05
    assert np.allclose(x.data(mx.cpu(1)).asnumpy(), -2 - 2 * 0.05)
    trainer.set_learning_rate(0.25, mode="override")
    _backward_plus_one(x)
    trainer.step(1)
    assert np.allclose(x.data().asnumpy(), -2.1 - 2 * 0.25)
    assert trainer.learning_rate == 0.25
    with pytest.raises(ValueError, match="learning_rate"):
        trainer.set_learning_rate(float("nan"), mode="override")


def test_live_learning_rate_is_part_of_saved_state(tmp_path) -> None:
    def make():
        sched = lr_scheduler.FactorScheduler(2, factor=0.5, base_lr=1.0)
        return gluon.Trainer([_param(ctx=[mx.cpu()])], "sgd",
                             {"learning_rate": 1.0, "lr_scheduler": sched})

    trainer = make()
    x = trainer._params[0]
    for _ in range(3):
        _backward_plus_one(x)
        trainer.step(1)
    trainer.set_learning_rate(0.2, mode="scale")
    trainer.save_states(str(tmp_path / "s"))
    again = make()
    again.load_states(str(tmp_path / "s"))
    assert again.learning_rate == pytest.approx(0.2)
    assert again._optimizer.lr_scheduler.base_lr == 0.5


def test_user_optimizer_trains_through_the_trainer() -> None:
    @opt.register
    class ScaledSign(opt.Optimizer):
        def create_state(self, index, weight):
            return nd.zeros(weight.shape, weight.context)

        def update(self, index, weight, grad, state):
            self._update_count(index)
            state[:] = state + 1
            weight[:] -= self._get_lr(index) * nd.sign(grad) * state

    x = _param(ctx=[mx.cpu()], init="ones")
    trainer = gluon.Trainer([x], "scaledsign", {"learning_rate": 0.1})
    for _ in range(2):
        _backward_plus_one(x)
        trainer.step(1)
    assert np.allclose(x.data().asnumpy(), 1 - 0.1 - 0.2)
    assert trainer._groups is None  # per-parameter fallback


def test_parameters_become_views_of_one_buffer_and_survive_cast() -> None:
    a, b = _param("a", (3, 2), [mx.cpu()], "ones"), _param("b", (4,), [mx.cpu()], "ones")
    trainer = gluon.Trainer([a, b], "sgd", {"learning_rate": 1.0})
    _backward_plus_one(a, b)
    trainer.step(1)
    flat = trainer._groups[0][1].weight
    assert a.data().raw.base is flat and b.data().raw.base is flat
    assert b.grad().raw.base is trainer._groups[0][1].grad
    b.set_data(nd.full((4,), 5.0))              # in-place write keeps the view
    assert flat[-4:].tolist() == [5.0] * 4
    a.cast("float64")
    _backward_plus_one(a, b)
    trainer.step(1)
    assert a.data().dtype == np.float64 and (a.data().asnumpy() == -1).all()
    assert (b.data().asnumpy() == 4).all()


def test_deferred_initialization_builds_buffers_at_first_step() -> None:
    p = gluon.Parameter("w", shape=(0, 2), allow_deferred_init=True, init="ones")
    p.initialize()
    trainer = gluon.Trainer([p], "adam", {"learning_rate": 0.1})
    p.shape = (3, 2)
    p._finish_deferred_init()
    _backward_plus_one(p)
    trainer.step(1)
    assert np.allclose(p.data().asnumpy(), 0.9)


def test_set_data_resets_the_kvstore_and_reinitializes_from_new_values() -> None:
    x = _param()
    trainer = gluon.Trainer([x], "sgd", {"learning_rate": 0.1})
    _backward_plus_one(x)
    trainer.step(1)
    assert np.allclose(x.data().asnumpy(), -0.2)
    x.set_data(nd.zeros((10,)))
    assert trainer._kvstore is None and trainer._kv_initialized is False
    _backward_plus_one(x)
    trainer.step(1)
    assert np.allclose(x.data(mx.cpu(1)).asnumpy(), -0.2)


def test_gradient_compression_through_the_trainer() -> None:
    x = _param()
    trainer = gluon.Trainer([x], "sgd", {"learning_rate": 1.0}, update_on_kvstore=False,
                            compression_params={"type": "2bit", "threshold": 1.5})
    _backward_plus_one(x)
    trainer.step(1)              # each device has residual 1 < 1.5: nothing sent
    assert (x.data().asnumpy() == 0).all()
    _backward_plus_one(x)
    trainer.step(1)              # residual 2 ≥ 1.5: each sends 1.5, summed 3
    assert np.allclose(x.data().asnumpy(), -3.0)


def test_states_round_trip_when_updating_on_kvstore(tmp_path) -> None:
    def make():
        x = _param(init="ones")
        return x, gluon.Trainer([x], "adam", {"learning_rate": 0.1})

    x, trainer = make()
    for _ in range(2):
        _backward_plus_one(x)
        trainer.step(1)
    assert trainer._update_on_kvstore
    trainer.save_states(str(tmp_path / "kv"))
    y, resumed = make()
    y.set_data(x.data())
    resumed.load_states(str(tmp_path / "kv"))
    for p, t in ((x, trainer), (y, resumed)):
        _backward_plus_one(p)
        t.step(1)
    assert resumed._optimizer.num_update == 3
    assert np.array_equal(x.data(mx.cpu(1)).asnumpy(), y.data(mx.cpu(1)).asnumpy())


def test_float16_parameters_with_multi_precision_update_fp32_masters() -> None:
    w = _param("w", (8,), [mx.cpu()], init="ones", dtype=np.float16)
    b = _param("b", (3,), [mx.cpu()], init="ones")
    trainer = gluon.Trainer([w, b], "sgd", {"learning_rate": 1e-4, "momentum": 0.9,
                                            "multi_precision": True})
    for _ in range(3):
        _backward_plus_one(w, b)
        trainer.step(1)
    assert w.data().dtype == np.float16
    dtypes = sorted(g.weight.dtype.name for _, g in trainer._groups)
    assert dtypes == ["float16", "float32"]
    master = trainer._updaters[0].states[0][1]  # MXNet 1.x SGD order: (momentum, weight32)
    assert master.dtype == np.float32
    expected = 1 - 1e-4 * (1 + 1.9 + 2.71)   # momentum 0.9 over three steps
    np.testing.assert_allclose(master.asnumpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(w.data().asnumpy(), expected, rtol=1e-3)


@pytest.mark.gpu
@pytest.mark.skipif(mx.num_gpus() == 0, reason="needs cupy and a CUDA GPU")
def test_adam_trainer_on_gpu_matches_cpu() -> None:
    results = []
    for ctx in (mx.cpu(), mx.gpu(0)):
        params = [_param("w", (4, 3), [ctx], init="ones"), _param("b", (3,), [ctx], "ones")]
        trainer = gluon.Trainer(params, "adam", {"learning_rate": 0.05, "wd": 0.01})
        for _ in range(3):
            _backward_plus_one(*params)
            trainer.step(2)
        results.append([p.data().asnumpy() for p in params])
    for a, b in zip(*results, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("name", "params"), [
    ("sgd", {"learning_rate": 0.1, "momentum": 0.9}),
    ("nag", {"learning_rate": 0.1, "momentum": 0.9}),
    ("adam", {"learning_rate": 0.02}),
    ("rmsprop", {"learning_rate": 0.01, "centered": True}),
    ("lamb", {"learning_rate": 0.02}),
    ("ftml", {"learning_rate": 0.02}),
])
def test_a_small_network_learns_with_each_optimizer(name, params) -> None:
    mx.random.seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 5)).astype(np.float32)
    y = (x @ rng.standard_normal((5, 1)) + 0.5).astype(np.float32)
    net = gluon.nn.Sequential()
    net.add(gluon.nn.Dense(16, activation="relu", in_units=5), gluon.nn.Dense(1, in_units=16))
    net.initialize(mx.init.Xavier())
    trainer = gluon.Trainer(net.collect_params(), name, params)
    loss_fn = gluon.loss.L2Loss()
    xs, ys = nd.array(x), nd.array(y)
    losses = []
    for _ in range(60):
        with autograd.record():
            loss = loss_fn(net(xs), ys)
        loss.backward()
        trainer.step(64)
        losses.append(float(loss.mean().asscalar()))
    assert losses[-1] < 0.2 * losses[0], (name, losses[0], losses[-1])


def test_kvstore_choice_on_one_device() -> None:
    x = _param(ctx=[mx.cpu()])
    plain = gluon.Trainer([x], "sgd")
    _backward_plus_one(x)
    plain.step(1)
    assert plain._kvstore is None and plain._update_on_kvstore is None   # as MXNet
    explicit = gluon.Trainer([x], "sgd", {"learning_rate": 0.5}, update_on_kvstore=True)
    _backward_plus_one(x)
    explicit.step(1)                        # Rudder: an explicit True is honoured
    assert explicit._kvstore.type == "device" and explicit._update_on_kvstore is True
    assert np.allclose(x.data().asnumpy(), -0.01 - 0.5)


def _sgd_momentum_setup():
    w = gluon.Parameter("w", shape=(2, 3), init=mx.init.Constant(0.5))
    b = gluon.Parameter("b", shape=(3,), init="zeros")
    w.initialize()
    b.initialize()
    trainer = gluon.Trainer([w, b], "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    return w, b, trainer


def _sgd_momentum_step(w, b, trainer) -> None:
    with autograd.record():
        loss = (w.data() * nd.array(np.arange(6.0).reshape(2, 3))).sum() + (b.data() * 2).sum()
    loss.backward()
    trainer.step(1)


def test_states_saved_before_trainer_states_moved_beside_the_trainer_still_load() -> None:
    """fixtures/sgd_momentum_v1.states was written by the engine of 2026-11-23 (states in
    engine/optimizer/checkpoint.py) after 2 steps of this setup; resuming from it must
    continue exactly as an uninterrupted run."""
    from pathlib import Path

    fixture = Path(__file__).parent / "fixtures" / "sgd_momentum_v1.states"
    w, b, uninterrupted = _sgd_momentum_setup()
    for _ in range(3):
        _sgd_momentum_step(w, b, uninterrupted)
    rw, rb, resumed = _sgd_momentum_setup()
    rw.set_data(nd.array([[0.5, 0.21000000834465027, -0.07999998331069946],
                          [-0.37000006437301636, -0.6599999666213989, -0.949999988079071]]))
    rb.set_data(nd.array([-0.5799999833106995] * 3))
    resumed.load_states(str(fixture))
    assert resumed.optimizer.num_update == 2
    _sgd_momentum_step(rw, rb, resumed)
    np.testing.assert_allclose(rw.data().asnumpy(), w.data().asnumpy(), rtol=1e-6)
    np.testing.assert_allclose(rb.data().asnumpy(), b.data().asnumpy(), rtol=1e-6)
