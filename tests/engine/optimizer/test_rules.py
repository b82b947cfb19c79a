"""Every optimizer's update equals its formula written out in numpy (reference.py).

The grid follows MXNet's compare_optimizer tests: random U(0,1) (3,4,5) weights, several
steps, with wd / clip_gradient / rescale_grad / lr_mult / wd_mult / momentum variations.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import engine
from engine import nd
from engine import optimizer as opt
from engine.optimizer.flat import FlatGroup
from engine.optimizer.updater import Updater

from .reference import REFERENCES

CONFIGS = {
    "sgd": [{"momentum": 0.0}, {"momentum": 0.9}],
    "nag": [{"momentum": 0.0}, {"momentum": 0.9}],
    "signum": [{"momentum": 0.0}, {"momentum": 0.9}, {"momentum": 0.9, "wd_lh": 0.01}],
    "dcasgd": [{"momentum": 0.0}, {"momentum": 0.9}],
    "lars": [{"momentum": 0.0, "eta": 0.01}, {"momentum": 0.9, "eta": 0.01}],
    "test": [{}],
    "adam": [{}, {"beta1": 0.8, "epsilon": 1e-6}],
    "adamw": [{}],
    "adamax": [{}],
    "nadam": [{}],
    "lamb": [{}, {"lower_bound": 0.1, "upper_bound": 1.0}],
    "ftml": [{}],
    "rmsprop": [{}, {"centered": True}, {"centered": True, "clip_weights": 0.5}],
    "adagrad": [{}],
    "adadelta": [{}],
    "ftrl": [{}, {"lamda1": 0.1, "beta": 0.5}],
    "lbsgd": [{"momentum": 0.9, "batch_scale": 2}, {"momentum": 0.0}],
}
GRID = list(itertools.product(
    [0.0, 0.05],            # wd
    [None, 0.4],            # clip_gradient
    [1.0, 0.14],            # rescale_grad
    [(1.0, 1.0), (0.5, 2.0)],  # (lr_mult, wd_mult) of parameter 0
))
STEPS = 3
LR = 0.1


def _run_case(name: str, config: dict, wd: float, clip, rescale: float, mults) -> None:
    rng = np.random.default_rng(hash((name, wd, clip, rescale, mults)) % 2**32)
    shapes = [(3, 4, 5), (3, 4, 5)]
    weights = [rng.uniform(0, 1, s).astype(np.float32) for s in shapes]
    optimizer = opt.create(name, learning_rate=LR, wd=wd, clip_gradient=clip,
                           rescale_grad=rescale, **config)
    optimizer.set_lr_mult({0: mults[0]})
    optimizer.set_wd_mult({0: mults[1]})
    hyper = dict(vars(optimizer))
    init_state, step = REFERENCES[name]
    arrays = [nd.array(w) for w in weights]
    states = [optimizer.create_state(i, a) for i, a in enumerate(arrays)]
    expected = [w.astype(np.float64) for w in weights]
    ref_states = [init_state(w) for w in expected]
    for t in range(1, STEPS + 1):
        # Two parameters per step: a per-parameter schedule bug (Nadam's) would show here.
        for i in range(2):
            g = rng.standard_normal(shapes[i]).astype(np.float32)
            lr = LR * (mults[0] if i == 0 else 1.0)
            wdi = wd * (mults[1] if i == 0 else 1.0)
            expected[i] = step(hyper, expected[i], g.astype(np.float64), ref_states[i], lr, wdi, t)
            optimizer.update(i, arrays[i], nd.array(g), states[i])
            np.testing.assert_allclose(
                arrays[i].asnumpy(), expected[i], rtol=1e-4, atol=1e-5,
                err_msg=f"{name} {config} wd={wd} clip={clip} r={rescale} mults={mults} "
                        f"param {i} step {t}")


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_update_matches_formula(name: str) -> None:
    for config in CONFIGS[name]:
        for case in GRID:
            _run_case(name, config, *case)


def test_sgld_adds_gaussian_noise_with_variance_lr() -> None:
    w0 = np.random.default_rng(0).uniform(0, 1, (3, 4, 5)).astype(np.float32)
    g = np.random.default_rng(1).standard_normal((3, 4, 5)).astype(np.float32)
    optimizer = opt.SGLD(learning_rate=0.04, wd=0.05, clip_gradient=0.5, rescale_grad=0.5)
    w = nd.array(w0)
    engine.random.seed(11)
    optimizer.update(0, w, nd.array(g), optimizer.create_state(0, w))
    engine.random.seed(11)
    # the noise is what nd.random.normal(0, √lr, dtype=float32) draws under the same seed
    noise = nd.random.normal(0, np.sqrt(0.04), shape=w0.shape, dtype=np.float32).asnumpy()
    G = np.clip(0.5 * g, -0.5, 0.5)
    expected = w0 - 0.04 / 2 * (G + 0.05 * w0) + noise
    np.testing.assert_allclose(w.asnumpy(), expected, rtol=1e-5, atol=1e-6)


def test_every_registered_optimizer_is_covered() -> None:
    covered = set(CONFIGS) | {"sgld", "groupadagrad"}  # groupadagrad: test_contrib.py
    builtin = [cls for cls in opt.Optimizer.opt_registry.classes()
               if cls.__module__.startswith("engine.")]
    assert len(builtin) >= 18
    missing = [cls.__name__ for cls in builtin if cls.__name__.lower() not in covered]
    assert not missing, f"registered optimizers without a formula test: {missing}"


FUSED_NAMES = sorted(set(CONFIGS) - {"lbsgd"}) + ["sgld"]


@pytest.mark.parametrize("name", FUSED_NAMES)
def test_flat_buffer_update_is_identical_to_per_parameter_update(name: str) -> None:
    """The Trainer's one-call update over a contiguous buffer gives bit-identical numbers."""
    rng = np.random.default_rng(3)
    shapes = [(3, 4, 5), (7,), (2, 3)]
    weights = [rng.uniform(0, 1, s).astype(np.float32) for s in shapes]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(3)]
    config = dict((CONFIGS.get(name) or [{}])[-1])

    def make():
        o = opt.create(name, learning_rate=LR, wd=0.01, clip_gradient=0.8, **config)
        o.set_lr_mult({0: 0.5, 2: 2.0})
        o.set_wd_mult({1: 0.0})
        return o

    per_param, fused = make(), make()
    singles = [nd.array(w) for w in weights]
    states = [per_param.create_state(i, a) for i, a in enumerate(singles)]
    engine.random.seed(5)
    for step_grads in grads:
        for i, a in enumerate(singles):
            per_param.update(i, a, nd.array(step_grads[i]), states[i])
    data = [nd.array(w) for w in weights]
    grad_arrays = [nd.zeros(s) for s in shapes]
    group = FlatGroup(engine.cpu(), [(i, d, g) for i, (d, g) in enumerate(
        zip(data, grad_arrays, strict=True))])
    assert fused.supports_fused()
    assert group.ensure_state(fused, Updater(fused))
    engine.random.seed(5)
    for step_grads in grads:
        for g_arr, g in zip(grad_arrays, step_grads, strict=True):
            g_arr[:] = g
        group.step(fused)
    for i in range(len(shapes)):
        assert np.array_equal(data[i].asnumpy(), singles[i].asnumpy()), (name, i)
        assert data[i].raw.base is group.weight  # still views into the flat buffer


@pytest.mark.gpu
@pytest.mark.skipif(engine.num_gpus() == 0, reason="needs cupy and a CUDA GPU")
@pytest.mark.parametrize("name", sorted(set(CONFIGS) - {"sgld"}))
def test_rules_on_cupy_match_numpy(name: str) -> None:
    rng = np.random.default_rng(4)
    w0 = rng.uniform(0, 1, (3, 4, 5)).astype(np.float32)
    grads = [rng.standard_normal((3, 4, 5)).astype(np.float32) for _ in range(3)]
    results = []
    for ctx in (engine.cpu(), engine.gpu(0)):
        o = opt.create(name, learning_rate=LR, wd=0.01, clip_gradient=0.8,
                       **CONFIGS[name][-1])
        w = nd.array(w0, ctx=ctx)
        state = o.create_state(0, w)
        for g in grads:
            o.update(0, w, nd.array(g, ctx=ctx), state)
        results.append(w.asnumpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-6)


ELEMENTWISE = sorted(cls.__name__.lower() for cls in opt.Optimizer.opt_registry.classes()
                     if cls.__module__.startswith("engine.") and cls._elementwise)


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_threaded_chunks_give_identical_numbers(monkeypatch, name: str) -> None:
    """A big flat buffer is split across threads; every element must come out the same."""
    from engine.optimizer import parallel

    monkeypatch.setenv("RUDDER_OPTIMIZER_THREADS", "3")
    rng = np.random.default_rng(8)
    shapes = [(300, 500), (120_001,)]
    assert sum(int(np.prod(s)) for s in shapes) >= 2 * parallel.MIN_ELEMENTS
    weights = [rng.uniform(0, 1, s).astype(np.float32) for s in shapes]
    grads = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    config = dict(CONFIGS[name][-1])
    per_param = opt.create(name, learning_rate=LR, wd=0.01, **config)
    fused = opt.create(name, learning_rate=LR, wd=0.01, **config)
    singles = [nd.array(w) for w in weights]
    states = [per_param.create_state(i, a) for i, a in enumerate(singles)]
    data, grad_arrays = [nd.array(w) for w in weights], [nd.array(g) for g in grads]
    group = FlatGroup(engine.cpu(), [(i, d, g) for i, (d, g) in enumerate(
        zip(data, grad_arrays, strict=True))])
    assert group.ensure_state(fused, Updater(fused))
    calls = []
    original = parallel.run_chunked
    monkeypatch.setattr(parallel, "run_chunked",
                        lambda size, work: calls.append(size) or original(size, work))
    for _ in range(2):
        for i, a in enumerate(singles):
            per_param.update(i, a, nd.array(grads[i]), states[i])
        group.step(fused)
    assert calls, "the flat update did not go through the threaded path"
    for i in range(len(shapes)):
        assert np.array_equal(data[i].asnumpy(), singles[i].asnumpy()), (name, i)
