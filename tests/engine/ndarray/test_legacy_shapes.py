# ruff: noqa: E501 - each case is one expression string shared verbatim with MXNet
"""Differential tests: legacy ``mx.nd`` result shapes (no 0-d results) as in MXNet 1.9.1.

MXNet's legacy operators return shape ``(1,)`` where numpy would return a 0-d array: full
reductions, ``dot`` of two vectors, ``squeeze`` down to nothing, indexing down to one
element. User code depends on it (``nd.sum(x).asnumpy()[0]``). Each case is one expression
over the inputs, written once and evaluated by both engines: MXNet in one subprocess per
module, the engine here. Expressions are constants of this file.
"""

from __future__ import annotations

import numpy as np
import pytest

import engine as mx
from engine import autograd, nd
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

_rng = np.random.default_rng(10)
INPUTS = {
    "m": _rng.uniform(-2, 2, (3, 4)).astype(np.float32),
    "x": _rng.uniform(0.5, 2, (2, 3, 4)).astype(np.float32),
    "v": np.array([0.5, -1.5, 2.5, -0.2], np.float32),
    "one": np.array([[1.25]], np.float32),
    "label": np.array([0, 3, 1], np.float32),
}

# expression -> evaluated by both; the oracle records shape, dtype and values
CASES = {
    # full reductions: functions, methods, every axis named, exclude with no axis
    "sum": "nd.sum(nd.array(inputs['m']))",
    "sum_method": "nd.array(inputs['m']).sum()",
    "sum_all_axes": "nd.sum(nd.array(inputs['x']), axis=(0, 1, 2))",
    "sum_empty_axis": "nd.sum(nd.array(inputs['m']), axis=())",
    "sum_exclude_no_axis": "nd.sum(nd.array(inputs['m']), exclude=True)",
    "sum_vector_axis0": "nd.sum(nd.array(inputs['v']), axis=0)",
    "sum_keepdims": "nd.sum(nd.array(inputs['m']), keepdims=True)",
    "sum_exclude_all": "nd.sum(nd.array(inputs['m']), axis=(0, 1), exclude=True)",
    "mean": "nd.mean(nd.array(inputs['m']))",
    "mean_method": "nd.array(inputs['x']).mean()",
    "max": "nd.max(nd.array(inputs['m']))",
    "min_method": "nd.array(inputs['m']).min()",
    "max_vector_axis": "nd.max(nd.array(inputs['v']), axis=0)",
    "prod": "nd.prod(nd.array(inputs['x'][0]))",
    "nansum": "nd.nansum(nd.array(inputs['m']))",
    "nanprod": "nd.nanprod(nd.array(inputs['x'][0]))",
    "norm": "nd.norm(nd.array(inputs['m']))",
    "norm_l1": "nd.norm(nd.array(inputs['v']), ord=1)",
    "norm_vector_axis": "nd.norm(nd.array(inputs['v']), axis=0)",
    "sum_axis_op": "nd.sum_axis(nd.array(inputs['v']), axis=0)",
    "argmax": "nd.argmax(nd.array(inputs['m']))",
    "argmax_vector": "nd.argmax(nd.array(inputs['v']), axis=0)",
    "argmin_method": "nd.array(inputs['v']).argmin(axis=0)",
    # indexing down to one element
    "index_vector": "nd.array(inputs['v'])[0]",
    "index_negative": "nd.array(inputs['v'])[-1]",
    "index_matrix_pair": "nd.array(inputs['m'])[1, 2]",
    "index_twice": "nd.array(inputs['m'])[1][2]",
    "index_3d_triple": "nd.array(inputs['x'])[1, 0, 3]",
    "index_row": "nd.array(inputs['m'])[1]",
    "index_slice_one": "nd.array(inputs['m'])[1, 2:3]",
    # shape operators and products
    "squeeze_all_ones": "nd.array(inputs['one']).squeeze()",
    "squeeze_axes": "nd.squeeze(nd.array(inputs['one']), axis=(0, 1))",
    "squeeze_vector_of_one": "nd.array(inputs['one'])[0].squeeze()",
    "dot_vectors": "nd.dot(nd.array(inputs['v']), nd.array(inputs['v']))",
    "pick_vector": "nd.pick(nd.array(inputs['v']), nd.array([2]), axis=0)",
    "topk_one": "nd.topk(nd.array(inputs['v']), k=1)",
    "reshape_to_scalar": "nd.array(inputs['one']).reshape(())",
    "softmax_cross_entropy": "nd.softmax_cross_entropy(nd.array(inputs['m']), nd.array(inputs['label']))",
    # creation from scalars keeps 0-d in MXNet 1.9.1 too
    "array_of_float": "nd.array(3.5)",
    "array_of_numpy_scalar": "nd.array(np.float32(2.0))",
    # what user code builds on these
    "sum_then_scale": "nd.sum(nd.array(inputs['m'])) * 2 + 1",
    "sum_transposed": "nd.sum(nd.array(inputs['m'])).T",
    "l2_loss_mean": "gluon.loss.L2Loss()(nd.array(inputs['m']), nd.zeros((3, 4))).mean()",
    "stack_indexed": "nd.stack(nd.array(inputs['v'])[0], nd.array(inputs['v'])[1])",
}

# expression over the variable y (inputs['m'], gradient attached) -> y's gradient
GRAD_CASES = {
    "sum": "nd.sum(y * y)",
    "mean": "y.mean()",
    "max": "nd.max(y)",
    "norm": "nd.norm(y)",
    "index_pair": "y[1, 2] * 3",
    "index_twice": "y[2][1] * y[0][0]",
    "dot_rows": "nd.dot(y[0], y[1])",
    "sum_times_element": "nd.sum(y) * y[0, 0]",
    "squeeze_of_index": "y[1:2, 0:1].squeeze() * 2",
}

# under mx.np_shape(True): indexing keeps 0-d, the legacy reductions stay (1,)
NP_SHAPE_CASES = {
    "sum": "nd.sum(nd.array(inputs['m']))",
    "mean_method": "nd.array(inputs['m']).mean()",
    "index_pair": "nd.array(inputs['m'])[1, 2]",
    "index_vector": "nd.array(inputs['v'])[3]",
    "dot_vectors": "nd.dot(nd.array(inputs['v']), nd.array(inputs['v']))",
    "squeeze_all_ones": "nd.array(inputs['one']).squeeze()",
    "argmax": "nd.argmax(nd.array(inputs['m']))",
}

SNIPPET = f"""
def record(prefix, cases):
    for name, expr in cases.items():
        try:
            value = eval(expr)
            outputs[prefix + name] = value.asnumpy()
            result[prefix + name] = [list(value.shape), np.dtype(value.dtype).name]
        except Exception as err:
            result[prefix + name] = 'error:' + type(err).__name__

record('', {CASES!r})
with mx.np_shape(True):
    record('npshape_', {NP_SHAPE_CASES!r})
for name, expr in {GRAD_CASES!r}.items():
    y = nd.array(inputs['m'])
    y.attach_grad()
    with autograd.record():
        out = eval(expr)
    out.backward()
    outputs['grad_' + name] = y.grad.asnumpy()
    result['grad_' + name] = list(out.shape)
result['asnumpy_index'] = float(nd.sum(nd.array(inputs['m'])).asnumpy()[0])
result['asscalar'] = float(nd.array(inputs['m']).mean().asscalar())
mx.npx.set_np()
try:
    a = mx.np.array(inputs['m'])
    result['np_sum'] = list(mx.np.sum(a).shape)
    result['np_dot'] = list(mx.np.dot(a[0], a[1]).shape)
    result['np_method_sum'] = list(a.sum().shape)
    result['np_index'] = list(a[1, 2].shape)
finally:
    mx.npx.reset_np()
"""


@pytest.fixture(scope="module")
def oracle():
    return run_mxnet(SNIPPET, INPUTS)


def _engine(expr: str, **names):
    # the expressions are this module's constants, shared verbatim with the MXNet snippet
    scope = {"nd": nd, "mx": mx, "np": np, "gluon": mx.gluon, "inputs": INPUTS, **names}
    return eval(expr, scope)  # noqa: S307


def _check(got, oracle, key: str) -> None:
    expected = oracle.json[key]
    assert not isinstance(expected, str), f"MXNet failed on {key}: {expected}"
    shape, dtype = expected
    assert isinstance(got, nd.NDArray)
    assert list(got.shape) == shape, key
    assert np.dtype(got.dtype).name == dtype, key
    np.testing.assert_allclose(got.asnumpy(), oracle[key], rtol=2e-5, atol=2e-6, err_msg=key)


@pytest.mark.parametrize("name", sorted(CASES))
def test_legacy_shape_matches_mxnet(oracle, name: str) -> None:
    _check(_engine(CASES[name]), oracle, name)


@pytest.mark.parametrize("name", sorted(NP_SHAPE_CASES))
def test_np_shape_scope_matches_mxnet(oracle, name: str) -> None:
    with mx.np_shape(True):
        got = _engine(NP_SHAPE_CASES[name])
    _check(got, oracle, "npshape_" + name)


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradient_through_legacy_shapes_matches_mxnet(oracle, name: str) -> None:
    y = nd.array(INPUTS["m"])
    y.attach_grad()
    with autograd.record():
        out = _engine(GRAD_CASES[name], y=y)
    out.backward()
    assert list(out.shape) == oracle.json["grad_" + name], name
    np.testing.assert_allclose(y.grad.asnumpy(), oracle["grad_" + name], rtol=2e-5, atol=2e-6)


def test_scalar_reading_patterns_match_mxnet(oracle) -> None:
    total = nd.sum(nd.array(INPUTS["m"])).asnumpy()[0]
    assert float(total) == pytest.approx(oracle.json["asnumpy_index"], rel=1e-6)
    mean = nd.array(INPUTS["m"]).mean().asscalar()
    assert isinstance(mean, np.float32)
    assert float(mean) == pytest.approx(oracle.json["asscalar"], rel=1e-6)


def test_numpy_front_end_keeps_zero_dim_results(oracle) -> None:
    mx.npx.set_np()
    try:
        a = mx.np.array(INPUTS["m"])
        got = {
            "np_sum": mx.np.sum(a).shape,
            "np_dot": mx.np.dot(a[0], a[1]).shape,
            "np_method_sum": a.sum().shape,
            "np_index": a[1, 2].shape,
        }
    finally:
        mx.npx.reset_np()
    assert {k: list(v) for k, v in got.items()} == {k: oracle.json[k] for k in got}


def test_numpy_front_end_functions_are_zero_dim_without_set_np() -> None:
    # the rule belongs to the front end: mx.np's reductions never take the legacy (1,)
    a = mx.np.array(INPUTS["m"])
    assert mx.np.sum(a).shape == ()
    assert mx.np.max(a).shape == ()
    assert mx.np.dot(mx.np.array(INPUTS["v"]), mx.np.array(INPUTS["v"])).shape == ()
    assert mx.np.squeeze(mx.np.array(INPUTS["one"])).shape == ()
    assert nd.sum(a).shape == (1,)  # ...while the legacy operator on the same array does


def test_zero_dim_gradient_buffers_keep_their_shape() -> None:
    # a reduction of a (1,) variable and indexing into it hand back (1,) gradients
    w = nd.array([2.0])
    w.attach_grad()
    with autograd.record():
        out = nd.sum(w * w) + w[0]
    out.backward()
    assert out.shape == (1,)
    np.testing.assert_allclose(w.grad.asnumpy(), [5.0])
