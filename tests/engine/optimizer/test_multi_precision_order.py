"""Multi-precision state layout as MXNet 1.9.1 lays it out: SGD, NAG and LARS keep
``(momentum, weight32)``, the others ``(weight32, state)``. Trainer states saved by MXNet
load position by position, so the order is part of the format."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import nd
from engine import optimizer as opt
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

OPTIMIZERS = {"sgd": {"momentum": 0.9}, "nag": {"momentum": 0.9}, "lars": {"momentum": 0.9},
              "adam": {}, "rmsprop": {}}

SNIPPET = f"""
for name, kw in {OPTIMIZERS!r}.items():
    o = mx.optimizer.create(name, multi_precision=True, **kw)
    w = nd.array(inputs['w'], dtype='float16')
    state = o.create_state_multi_precision(0, w)
    def describe(s):
        if s is None:
            return None
        if isinstance(s, (tuple, list)):
            return [describe(x) for x in s]
        return str(np.dtype(s.dtype)) + (':master' if np.allclose(s.asnumpy(), inputs['w'])
                                          else ':zeros')
    result[name] = describe(state)
"""


W = np.array([0.5, -1.0, 2.0], np.float32)


@pytest.fixture(scope="module")
def oracle():
    return run_mxnet(SNIPPET, {"w": W}).json


def _describe(state, w):
    if state is None:
        return None
    if isinstance(state, (tuple, list)):
        return [_describe(s, w) for s in state]
    kind = "master" if np.allclose(state.asnumpy(), w) else "zeros"
    return f"{np.dtype(state.dtype)}:{kind}"


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_multi_precision_state_order_matches_mxnet(oracle, name: str) -> None:
    o = opt.create(name, multi_precision=True, **OPTIMIZERS[name])
    state = o.create_state_multi_precision(0, nd.array(W, dtype="float16"))
    assert _describe(state, W) == oracle[name]


def test_multi_precision_sgd_updates_through_the_reordered_state() -> None:
    o = opt.SGD(learning_rate=0.1, momentum=0.9, multi_precision=True)
    w = nd.array([1.0, 2.0], dtype="float16")
    state = o.create_state_multi_precision(0, w)
    o.update_multi_precision(0, w, nd.array([1.0, 1.0], dtype="float16"), state)
    mom, master = state
    np.testing.assert_allclose(mom.asnumpy(), [-0.1, -0.1], rtol=1e-6)
    np.testing.assert_allclose(master.asnumpy(), [0.9, 1.9], rtol=1e-6)
    np.testing.assert_allclose(w.asnumpy(), [0.9, 1.9], rtol=1e-3)


def test_sgld_noise_is_nd_random_normal_under_the_same_seed() -> None:
    w0 = np.zeros((4, 5), np.float32)
    w = nd.array(w0)
    engine.random.seed(3)
    opt.SGLD(learning_rate=0.09).update(0, w, nd.zeros((4, 5)), None)
    engine.random.seed(3)
    noise = nd.random.normal(0, 0.3, shape=(4, 5), dtype="float32")
    np.testing.assert_array_equal(w.asnumpy(), noise.asnumpy())
