"""The compiled one-pass rules (engine/optimizer/compiled.py) give the numpy rules' floats.

Each case runs the same optimizer twice over the same flat buffers, once through the
compiled kernel and once with it switched off, and compares the weights and states bit for
bit after several steps: float32 and float64, wd, clipping, rescale, lr/wd multipliers and
gradients spanning many magnitudes (where a fused multiply-add or another order of
operations would round differently).
"""

from __future__ import annotations

import itertools
from functools import partial
from typing import Any

import numpy as np
import pytest

from engine import optimizer as opt
from engine.ndarray import cpu_kernels
from engine.optimizer import compiled
from engine.optimizer.segments import Segments

pytestmark = pytest.mark.skipif(not cpu_kernels.ENABLED, reason="numba is not installed")

SIZES = [257, 64 * 33, 5]


def _counted(calls: list[int], kernel, *args):
    calls.append(1)
    return kernel(*args)


def _run(name: str, config: dict, dtype, use_kernel: bool, monkeypatch, steps: int = 4):
    """``steps`` fused updates of optimizer ``name`` (its compiled kernel is
    ``compiled.<name>``), through the kernel or with it switched off."""
    rng = np.random.default_rng(7)
    total = sum(SIZES)
    w = (rng.standard_normal(total) * 3).astype(dtype)
    optimizer = opt.create(name, **config)
    optimizer.set_lr_mult({0: 1.0})
    if name == "adam":
        state: Any = (np.zeros(total, dtype), np.zeros(total, dtype))
    else:  # sgd: the momentum, or no state without one
        state = np.zeros(total, dtype) if optimizer.momentum else None
    calls: list[int] = []
    with monkeypatch.context() as patch:
        if use_kernel:
            patch.setattr(compiled, name, partial(_counted, calls, getattr(compiled, name)))
        else:
            patch.setattr(compiled, "applies", lambda *arrays: False)
        for _ in range(steps):
            # magnitudes from 1e-8 to 1e4, both signs: rounding differences would show
            g = (rng.standard_normal(total) * 10.0 ** rng.integers(-8, 5, total)).astype(dtype)
            optimizer.fused_update([0, 1, 2], w, g, state, Segments(SIZES, [0, 1, 2]))
    assert bool(calls) == use_kernel
    return w, state


CASES = [dict(zip(("wd", "clip_gradient", "rescale_grad", "beta1"), values, strict=True))
         for values in itertools.product([0.0, 0.01], [None, 0.5], [1.0, 1 / 128], [0.9, 0.5])]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("config", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_compiled_adam_equals_numpy_rule(config, dtype, monkeypatch):
    config = {"learning_rate": 0.01, "epsilon": 1e-7, **config}
    w_kernel, s_kernel = _run("adam", config, dtype, True, monkeypatch)
    w_numpy, s_numpy = _run("adam", config, dtype, False, monkeypatch)
    np.testing.assert_array_equal(w_kernel, w_numpy)
    for a, b in zip(s_kernel, s_numpy, strict=True):
        np.testing.assert_array_equal(a, b)


def test_per_parameter_lr_keeps_numpy(monkeypatch):
    """Different lr_mult per parameter makes lr a vector: the numpy rule takes it."""
    optimizer = opt.create("adam", learning_rate=0.01)
    optimizer.set_lr_mult({0: 0.5})
    called = []
    monkeypatch.setattr(compiled, "adam", lambda *args: called.append(1))
    total = sum(SIZES)
    w, g = np.ones(total, np.float32), np.full(total, 0.1, np.float32)
    state = (np.zeros(total, np.float32), np.zeros(total, np.float32))
    optimizer.fused_update([0, 1, 2], w, g, state, Segments(SIZES, [0, 1, 2]))
    assert not called
    assert w[0] != w[-1]  # the halved lr reached parameter 0 only


def test_numpy_scalar_hyperparameters_keep_numpy(monkeypatch):
    """A numpy float64 beta promotes numpy's float32 arithmetic: the kernel must not guess."""
    optimizer = opt.create("adam", learning_rate=0.01, beta1=np.float64(0.9))
    called = []
    monkeypatch.setattr(compiled, "adam", lambda *args: called.append(1))
    w, g = np.ones(8, np.float32), np.full(8, 0.1, np.float32)
    optimizer.fused_update([0], w, g, (np.zeros(8, np.float32), np.zeros(8, np.float32)),
                           Segments([8], [0]))
    assert not called


def test_multidimensional_arrays_update_in_place():
    """``nd.adam_update`` hands the rule N-d arrays: the kernel updates them through views."""
    optimizer = opt.create("adam", learning_rate=0.1)
    w, g = np.ones((3, 4), np.float32), np.full((3, 4), 0.5, np.float32)
    m, v = np.zeros((3, 4), np.float32), np.zeros((3, 4), np.float32)
    optimizer.fused_update([0], w, g, (m, v), Segments([12], [0]))
    assert w.shape == (3, 4) and (w < 1).all() and (m > 0).all() and (v > 0).all()


@pytest.mark.parametrize("wd", [0.0, 0.01])
def test_one_parameter_updates_equal_numpy_rule(wd, monkeypatch):
    """``Optimizer.update`` (Module, Updater) passes the step count as an int."""
    from engine import nd

    results = []
    for use_kernel in (True, False):
        rng = np.random.default_rng(2)
        optimizer = opt.create("adam", learning_rate=0.01, wd=wd)
        weight = nd.array(rng.standard_normal((5, 7)).astype(np.float32))
        state = optimizer.create_state(0, weight)
        calls: list[int] = []
        with monkeypatch.context() as patch:
            if use_kernel:
                patch.setattr(compiled, "adam", partial(_counted, calls, compiled.adam))
            else:
                patch.setattr(compiled, "applies", lambda *arrays: False)
            for _ in range(3):
                grad = nd.array(rng.standard_normal((5, 7)).astype(np.float32))
                optimizer.update(0, weight, grad, state)
        assert len(calls) == (3 if use_kernel else 0)
        results.append([weight.asnumpy(), state[0].asnumpy(), state[1].asnumpy()])
    for a, b in zip(*results, strict=True):
        np.testing.assert_array_equal(a, b)


SGD_CASES = [dict(zip(("wd", "clip_gradient", "rescale_grad", "momentum"), values, strict=True))
             for values in itertools.product([0.0, 0.01], [None, 0.5], [1.0, 1 / 128],
                                             [0.0, 0.9])]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("config", SGD_CASES,
                         ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_compiled_sgd_equals_numpy_rule(config, dtype, monkeypatch):
    config = {"learning_rate": 0.05, **config}
    w_kernel, m_kernel = _run("sgd", config, dtype, True, monkeypatch)
    w_numpy, m_numpy = _run("sgd", config, dtype, False, monkeypatch)
    np.testing.assert_array_equal(w_kernel, w_numpy)
    if m_kernel is not None:
        np.testing.assert_array_equal(m_kernel, m_numpy)
