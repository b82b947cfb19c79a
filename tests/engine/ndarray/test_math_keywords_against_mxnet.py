"""Differential tests: float32 ``exp``/``log`` to MXNet's precision, rounding at halves, and
the keywords MXNet's parameterless operators accept and ignore.

numpy's vectorized float32 ``exp``/``log`` are up to 2-3 units in the last place (ulp) off
the rounded result; MXNet (libm) is within 1, so comparisons at MXNet's own tolerances see
the difference. MXNet's operators without parameters (element-wise math, broadcast
arithmetic, ...) run with any keyword: ``nd.broadcast_maximum(a, b, axis=1)`` is MXNet code
that works, listed here from MXNet's operator registry itself.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine import nd
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

_rng = np.random.default_rng(27)
POINTS = np.concatenate([
    np.linspace(-87, 88, 200001, dtype=np.float32),
    _rng.uniform(-20, 20, 100000).astype(np.float32),
])
POSITIVE = np.abs(POINTS) + np.float32(1e-30)
HALVES = np.arange(-3.5, 4.0, 0.5, dtype=np.float32)  # where rounding rules differ


def _ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


@pytest.fixture(scope="module")
def mxnet_exp_log():
    return run_mxnet(
        "outputs['exp'] = nd.exp(nd.array(inputs['x']))\n"
        "outputs['log'] = nd.log(nd.array(inputs['p']))\n"
        "for name in ['rint', 'round', 'fix', 'trunc', 'floor', 'ceil']:\n"
        "    outputs[name] = getattr(nd, name)(nd.array(inputs['halves']))\n",
        {"x": POINTS, "p": POSITIVE, "halves": HALVES})


@pytest.mark.parametrize("name, points", [("exp", POINTS), ("log", POSITIVE)])
def test_float32_exp_and_log_within_one_ulp_of_mxnet(mxnet_exp_log, name, points) -> None:
    theirs = mxnet_exp_log[name]
    with np.errstate(over="ignore"):
        ours = getattr(nd, name)(nd.array(points)).asnumpy()
        numpy_float32 = getattr(np, name)(points)
    assert ours.dtype == np.float32
    assert _ulps(ours, theirs).max() <= 1
    # the check can fail: numpy's own float32 function is further off
    assert _ulps(numpy_float32, theirs).max() > 1


LIST_PARAMETERLESS = """
from mxnet.operator import get_all_registered_operators, get_operator_arguments
names = []
for op in get_all_registered_operators():
    if op.startswith('_') or not hasattr(mx.nd, op):
        continue
    args = get_operator_arguments(op)
    if all(t.startswith('NDArray') for t in args.types):
        names.append([op, args.narg, args.types[0].endswith('[]')])
result['ops'] = sorted(names)
"""

# inputs an operator needs beyond ones((2, 3)) to run at all
SPECIAL_INPUTS = {
    "batch_take": lambda: [nd.ones((2, 3)), nd.array([0, 1])],
    "gather_nd": lambda: [nd.ones((2, 3)), nd.array([[0], [1]])],
    "fill_element_0index": lambda: [nd.ones((2, 3)), nd.ones((2,)), nd.array([0, 1])],
    "softmax_cross_entropy": lambda: [nd.ones((2, 3)), nd.array([0, 1])],
    "where": lambda: [nd.ones((2, 3)), nd.ones((2, 3)), nd.zeros((2, 3))],
    "khatri_rao": lambda: [nd.ones((2, 3)), nd.ones((4, 3))],
}
LINALG_SQUARE = ("linalg_det", "linalg_gelqf", "linalg_inverse", "linalg_potrf", "linalg_potri",
                 "linalg_slogdet", "linalg_sumlogdiag")


@pytest.fixture(scope="module")
def parameterless():
    return run_mxnet(LIST_PARAMETERLESS).json["ops"]


def _arguments(name: str, narg: int) -> list[nd.NDArray]:
    if name in SPECIAL_INPUTS:
        return SPECIAL_INPUTS[name]()
    if name in LINALG_SQUARE:
        return [nd.array(np.eye(3) * 2 + 0.1)]
    return [nd.ones((2, 3)) * 0.5 for _ in range(max(narg, 1))]


def test_every_parameterless_mxnet_operator_ignores_unknown_keywords(parameterless) -> None:
    assert len(parameterless) > 80  # MXNet 1.9.1 has 94; a broken listing would pass vacuously
    refused = []
    for name, narg, _ in parameterless:
        op = getattr(nd, name, None)
        if op is None:
            continue  # a missing operator is test_mxnet_public_names' business
        try:
            with np.errstate(all="ignore"):  # arccosh(0.5) and friends: NaN is fine here
                op(*_arguments(name, narg), axis=1, foo="bar")
        except TypeError as err:
            refused.append(f"{name}: {err}")
    assert not refused, refused


@pytest.mark.parametrize("name", ["rint", "round", "fix", "trunc", "floor", "ceil"])
def test_rounding_at_halves_matches_mxnet(mxnet_exp_log, name: str) -> None:
    # MXNet's rint takes halves down and its round away from zero (numpy: to even)
    got = getattr(nd, name)(nd.array(HALVES)).asnumpy()
    np.testing.assert_array_equal(got, mxnet_exp_log[name])

