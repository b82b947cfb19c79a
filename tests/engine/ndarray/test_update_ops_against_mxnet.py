"""The fused optimizer operators (``nd.sgd_update``, ``nd.adam_update``, ...) against MXNet
1.9.1: the new weight (written to ``out`` or returned) and the states updated in place."""

from __future__ import annotations

import numpy as np
import pytest

from engine import nd
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

_rng = np.random.default_rng(7)
INPUTS = {
    "w": _rng.uniform(-1, 1, (3, 4)).astype(np.float32),
    "g": _rng.uniform(-2, 2, (3, 4)).astype(np.float32),
    "s1": _rng.uniform(0.5, 1.0, (3, 4)).astype(np.float32),  # keeps n - g² > 0
    "s2": _rng.uniform(0, 0.5, (3, 4)).astype(np.float32),
    "s3": _rng.uniform(0, 0.5, (3, 4)).astype(np.float32),
}
COMMON = "rescale_grad=0.7, clip_gradient=0.9, wd=0.05"
CASES = {
    # name: (call with states named s1..s3, number of states)
    "sgd": (f"nd.sgd_update(W, G, lr=0.1, {COMMON}, out=W)", 0),
    "sgd_noclip": ("nd.sgd_update(W, G, lr=0.1, wd=0.01, out=W)", 0),
    "sgd_mom": (f"nd.sgd_mom_update(W, G, S1, lr=0.1, momentum=0.9, {COMMON}, out=W)", 1),
    "mp_sgd": (f"nd.mp_sgd_update(W16, G16, W32, lr=0.1, {COMMON}, out=W16)", 0),
    "mp_sgd_mom": (f"nd.mp_sgd_mom_update(W16, G16, S1, W32, lr=0.1, momentum=0.9, {COMMON}, "
                   "out=W16)", 1),
    "nag_mom": (f"nd.nag_mom_update(W, G, S1, lr=0.1, momentum=0.9, {COMMON}, out=W)", 1),
    "mp_nag_mom": (f"nd.mp_nag_mom_update(W16, G16, S1, W32, lr=0.1, momentum=0.9, {COMMON}, "
                   "out=W16)", 1),
    "adam": (f"nd.adam_update(W, G, S1, S2, lr=0.01, beta1=0.8, beta2=0.99, epsilon=1e-6, "
             f"{COMMON}, out=W)", 2),
    "rmsprop": (f"nd.rmsprop_update(W, G, S1, lr=0.01, gamma1=0.9, {COMMON}, out=W)", 1),
    "rmspropalex": (f"nd.rmspropalex_update(W, G, S1, S2, S3, lr=0.01, gamma1=0.9, gamma2=0.8,"
                    f" {COMMON}, out=W)", 3),
    "ftrl": (f"nd.ftrl_update(W, G, S1, S2, lr=0.1, lamda1=0.02, beta=1.5, {COMMON}, out=W)",
             2),
    "ftml": ("nd.ftml_update(W, G, S1, S2, S3, lr=0.01, t=3, beta1=0.6, beta2=0.999, "
             "rescale_grad=0.7, clip_grad=0.9, wd=0.05, out=W)", 3),
    "signsgd": ("nd.signsgd_update(W, G, lr=0.1, wd=0.05, out=W)", 0),
    "signum": ("nd.signum_update(W, G, S1, lr=0.1, momentum=0.9, wd=0.05, rescale_grad=0.7, "
               "clip_gradient=0.9, wd_lh=0.01, out=W)", 1),
    "sgd_returns_new": (f"nd.sgd_update(W, G, lr=0.1, {COMMON})", 0),
    "lamb1": ("nd.lamb_update_phase1(W, G, S1, S2, beta1=0.9, beta2=0.99, epsilon=1e-6, t=2, "
              "wd=0.05, rescale_grad=0.7, clip_gradient=0.9)", 2),
    "lamb2": ("nd.lamb_update_phase2(W, G, nd.array([2.0]), nd.array([4.0]), lr=0.1, "
              "lower_bound=0.5, upper_bound=1.5)", 0),
    "multi_sgd": ("nd.multi_sgd_update(W, G, W2, G2, lrs=(0.1, 0.2), wds=(0.0, 0.1), "
                  "num_weights=2, out=[W, W2])[1]", 0),
    "multi_sgd_mom": ("nd.multi_sgd_mom_update(W, G, S1, W2, G2, S2, lrs=(0.1, 0.2), "
                      "wds=(0.0, 0.1), momentum=0.9, num_weights=2, out=[W, W2])[1]", 2),
    "preloaded_multi_sgd": ("nd.preloaded_multi_sgd_update(W, G, W2, G2, nd.array([0.1, 0.2]),"
                            " nd.array([0.0, 0.1]), num_weights=2, out=[W, W2])[1]", 0),
    "multi_sum_sq": ("nd.multi_sum_sq(W, G, num_arrays=2)", 0),
    "multi_lars": ("nd.multi_lars(nd.array([0.1, 0.2, 0.3]), nd.array([4.0, 0.0, 9.0]), "
                   "nd.array([1.0, 1.0, 0.0]), nd.array([0.1, 0.1, 0.1]), eta=0.5, eps=1e-3, "
                   "rescale_grad=0.5)", 0),
    "all_finite": ("nd.all_finite(W)", 0),
    "all_finite_nan": ("nd.all_finite(nd.array([1.0, np.nan]))", 0),
    "multi_all_finite": ("nd.multi_all_finite(W, nd.array([np.inf]), num_arrays=2)", 0),
}

PRELUDE = """
W = nd.array(inputs['w']); G = nd.array(inputs['g'])
W2 = nd.array(inputs['w'] * 2); G2 = nd.array(inputs['g'] * 0.5)
W16 = nd.array(inputs['w'], dtype='float16'); G16 = nd.array(inputs['g'], dtype='float16')
W32 = nd.array(inputs['w'])
S1 = nd.array(inputs['s1']); S2 = nd.array(inputs['s2']); S3 = nd.array(inputs['s3'])
"""

SNIPPET = f"""
cases = {CASES!r}
for name, (expr, n_states) in cases.items():
    exec({PRELUDE!r})
    out = eval(expr)
    outputs[name] = out
    for k in range(1, n_states + 1):
        outputs[name + '_s' + str(k)] = eval('S' + str(k))
    if 'W32' in expr:
        outputs[name + '_w32'] = W32
    outputs[name + '_w'] = W
"""


@pytest.fixture(scope="module")
def oracle():
    return run_mxnet(SNIPPET, INPUTS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_update_matches_mxnet(oracle, name: str) -> None:
    expr, n_states = CASES[name]
    scope = {"nd": nd, "np": np, "inputs": INPUTS}
    # the prelude and expressions are this module's constants, shared with the MXNet snippet
    exec(PRELUDE, scope)  # noqa: S102
    out = eval(expr, scope)  # noqa: S307
    tol = {"rtol": 1e-3, "atol": 1e-3} if "16" in expr else {"rtol": 1e-5, "atol": 1e-6}
    np.testing.assert_allclose(out.asnumpy(), oracle[name], **tol, err_msg=name)
    np.testing.assert_allclose(scope["W"].asnumpy(), oracle[name + "_w"], **tol)
    for k in range(1, n_states + 1):
        np.testing.assert_allclose(scope[f"S{k}"].asnumpy(), oracle[f"{name}_s{k}"], **tol,
                                   err_msg=f"{name} state {k}")
    if "W32" in expr:
        np.testing.assert_allclose(scope["W32"].asnumpy(), oracle[name + "_w32"], rtol=1e-5)
