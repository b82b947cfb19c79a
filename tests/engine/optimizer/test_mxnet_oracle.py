"""Differential tests: the same optimizer steps, schedules and Trainer run in MXNet 1.9.1.

Everything runs in ONE MXNet subprocess per module (interpreter start-up dominates), and
each case is compared here. Skipped when bench/setup has not built the MXNet anchor.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine import autograd, gluon, lr_scheduler, nd
from engine import optimizer as opt
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

SHAPE = (3, 4, 5)
STEPS = 3
CASES = {
    "sgd_momentum": ("sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.05,
                             "clip_gradient": 0.4, "rescale_grad": 0.14}),
    "sgd_plain": ("sgd", {"learning_rate": 0.1, "wd": 0.03}),
    "nag": ("nag", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.05, "clip_gradient": 0.5}),
    "adam": ("adam", {"learning_rate": 0.01, "wd": 0.03, "clip_gradient": 0.5,
                      "rescale_grad": 0.8}),
    "rmsprop": ("rmsprop", {"learning_rate": 0.01, "wd": 0.05, "clip_gradient": 0.4}),
    "rmsprop_centered": ("rmsprop", {"learning_rate": 0.01, "wd": 0.05, "centered": True,
                                     "clip_weights": 0.3}),
    "adagrad": ("adagrad", {"learning_rate": 0.1, "wd": 0.05, "rescale_grad": 0.14}),
    "adadelta": ("adadelta", {"wd": 0.05, "clip_gradient": 0.4}),
    "ftrl": ("ftrl", {"learning_rate": 0.1, "wd": 0.03, "lamda1": 0.02}),
    "signum": ("signum", {"learning_rate": 0.01, "momentum": 0.9, "wd": 0.05,
                          "clip_gradient": 0.4, "wd_lh": 0.01}),
    "signsgd": ("signum", {"learning_rate": 0.01, "momentum": 0.0, "wd": 0.05}),
    "ftml": ("ftml", {"learning_rate": 0.01, "wd": 0.05, "clip_gradient": 0.4}),
    "lamb": ("lamb", {"learning_rate": 0.01, "wd": 0.05, "clip_gradient": 0.4}),
    "lamb_bounds": ("lamb", {"learning_rate": 0.01, "lower_bound": 0.1, "upper_bound": 1.0}),
    "nadam": ("nadam", {"learning_rate": 0.01, "wd": 0.03}),
    "dcasgd": ("dcasgd", {"learning_rate": 0.1, "wd": 0.05}),
    "adamax": ("adamax", {"learning_rate": 0.01, "wd": 0.03, "clip_gradient": 0.5}),
    "lars": ("lars", {"learning_rate": 0.1, "momentum": 0.9, "eta": 0.01, "wd": 0.05}),
    "lbsgd": ("lbsgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.05}),
    "test_optimizer": ("test", {"rescale_grad": 0.5}),
}
SCHEDULERS = {
    "factor": ("FactorScheduler", {"step": 100, "factor": 0.1, "stop_factor_lr": 1e-4,
                                   "base_lr": 1, "warmup_steps": 20, "warmup_begin_lr": 0.1,
                                   "warmup_mode": "constant"}),
    "multifactor": ("MultiFactorScheduler", {"step": [15, 25], "factor": 0.1, "base_lr": 0.1,
                                             "warmup_steps": 10, "warmup_begin_lr": 0.05}),
    "poly": ("PolyScheduler", {"max_update": 1000, "base_lr": 3, "pwr": 2,
                               "warmup_steps": 100}),
    "cosine": ("CosineScheduler", {"max_update": 1000, "base_lr": 3, "final_lr": 0.1,
                                   "warmup_steps": 50, "warmup_begin_lr": 0.5}),
}
SCHED_POINTS = list(range(0, 1200, 7))

SNIPPET = f"""
cases = {CASES!r}
schedulers = {SCHEDULERS!r}
points = {SCHED_POINTS!r}
for case, (name, kw) in cases.items():
    o = mx.optimizer.create(name, **kw)
    w = nd.array(inputs['w0'])
    state = o.create_state(0, w)
    for t in range({STEPS}):
        o.update(0, w, nd.array(inputs['g%d' % t]), state)
        outputs['%s_%d' % (case, t)] = w.copy()
for name in ('sgd', 'adam'):
    o = mx.optimizer.create(name, learning_rate=0.01, momentum=0.9, wd=0.05,
                            multi_precision=True) if name == 'sgd' else \
        mx.optimizer.create(name, learning_rate=0.01, wd=0.05, multi_precision=True)
    w = nd.array(inputs['w0'], dtype='float16')
    state = o.create_state_multi_precision(0, w)
    for t in range({STEPS}):
        o.update_multi_precision(0, w, nd.array(inputs['g%d' % t], dtype='float16'), state)
        outputs['mp_%s_%d' % (name, t)] = w.copy()
for key, (cls, kw) in schedulers.items():
    s = getattr(mx.lr_scheduler, cls)(**kw)
    outputs['sched_' + key] = np.array([s(n) for n in points], dtype=np.float64)

# Gluon Trainer: Adam with a FactorScheduler and an lr_mult, one context.
w = gluon.Parameter('w', shape=(4, 3), lr_mult=0.5)
b = gluon.Parameter('b', shape=(3,))
for p in (w, b):
    p.initialize(init=mx.init.One())
trainer = gluon.Trainer({{'w': w, 'b': b}}, 'adam',
                        {{'learning_rate': 0.05, 'wd': 0.01,
                         'lr_scheduler': mx.lr_scheduler.FactorScheduler(2, 0.5, base_lr=0.05)}})
for k in range(4):
    with autograd.record():
        loss = (w.data() * nd.array(inputs['t%d' % k])).sum() + (b.data() * b.data()).sum()
    loss.backward()
    trainer.step(2)
    outputs['trainer_w_%d' % k] = w.data().copy()
    outputs['trainer_b_%d' % k] = b.data().copy()
    result.setdefault('trainer_lr', []).append(trainer.learning_rate)
"""


@pytest.fixture(scope="module")
def oracle():
    rng = np.random.default_rng(2024)
    inputs = {"w0": rng.uniform(0, 1, SHAPE).astype(np.float32)}
    for t in range(STEPS):
        inputs[f"g{t}"] = rng.standard_normal(SHAPE).astype(np.float32)
    for k in range(4):
        inputs[f"t{k}"] = rng.standard_normal((4, 3)).astype(np.float32)
    return inputs, run_mxnet(SNIPPET, inputs, timeout=300)


@pytest.mark.parametrize("case", sorted(CASES))
def test_optimizer_steps_match_mxnet(oracle, case: str) -> None:
    inputs, run = oracle
    name, kw = CASES[case]
    o = opt.create(name, **kw)
    w = nd.array(inputs["w0"])
    state = o.create_state(0, w)
    for t in range(STEPS):
        o.update(0, w, nd.array(inputs[f"g{t}"]), state)
        np.testing.assert_allclose(w.asnumpy(), run[f"{case}_{t}"], rtol=1e-4, atol=1e-5,
                                   err_msg=f"{case} step {t}")


@pytest.mark.parametrize("name", ["sgd", "adam"])
def test_float16_multi_precision_matches_mxnet(oracle, name: str) -> None:
    inputs, run = oracle
    extra = {"momentum": 0.9} if name == "sgd" else {}
    o = opt.create(name, learning_rate=0.01, wd=0.05, multi_precision=True, **extra)
    w = nd.array(inputs["w0"], dtype=np.float16)
    state = o.create_state_multi_precision(0, w)
    for t in range(STEPS):
        o.update_multi_precision(0, w, nd.array(inputs[f"g{t}"], dtype=np.float16), state)
        assert w.dtype == np.float16
        np.testing.assert_allclose(w.asnumpy().astype(np.float32), run[f"mp_{name}_{t}"],
                                   rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("key", sorted(SCHEDULERS))
def test_scheduler_values_match_mxnet(oracle, key: str) -> None:
    _, run = oracle
    cls, kw = SCHEDULERS[key]
    sched = getattr(lr_scheduler, cls)(**kw)
    ours = np.array([sched(n) for n in SCHED_POINTS])
    np.testing.assert_allclose(ours, run[f"sched_{key}"], rtol=1e-12, atol=1e-15)


def test_trainer_adam_with_scheduler_and_lr_mult_matches_mxnet(oracle) -> None:
    inputs, run = oracle
    w = gluon.Parameter("w", shape=(4, 3), lr_mult=0.5)
    b = gluon.Parameter("b", shape=(3,))
    for p in (w, b):
        p.initialize(init="ones")
    trainer = gluon.Trainer({"w": w, "b": b}, "adam", {
        "learning_rate": 0.05, "wd": 0.01,
        "lr_scheduler": lr_scheduler.FactorScheduler(2, 0.5, base_lr=0.05)})
    lrs = []
    for k in range(4):
        with autograd.record():
            loss = (w.data() * nd.array(inputs[f"t{k}"])).sum() + (b.data() * b.data()).sum()
        loss.backward()
        trainer.step(2)
        lrs.append(trainer.learning_rate)
        np.testing.assert_allclose(w.data().asnumpy(), run[f"trainer_w_{k}"], rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(b.data().asnumpy(), run[f"trainer_b_{k}"], rtol=1e-5,
                                   atol=1e-6)
    assert lrs == pytest.approx(run.json["trainer_lr"], rel=1e-12)
