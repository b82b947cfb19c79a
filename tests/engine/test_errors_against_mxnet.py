# ruff: noqa: E501 - each case is one expression string shared verbatim with MXNet
"""Differential tests: the engine raises where MXNet 1.9.1 raises, with MXNet's error type.

Each case runs a call that MXNet refuses (or accepts) and records which of the error types
user code catches the exception is an instance of. The engine's error must be at least as
catchable as MXNet's: an ``MXNetError`` where MXNet raises one (and also the Python error
that fits, such as ValueError for a bad argument value), a plain ``ValueError`` where
MXNet's Python code raises that, and no error where MXNet has none. Cases read their result
(``asnumpy()``): MXNet's asynchronous kernels report a failure when the result is read; the
engine's synchronous ones at the call, which such code catches as well.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.gluon.differential import compare, oracle_results
from tests.oracle import needs_mxnet

pytestmark = needs_mxnet

INPUTS = {"pixels": np.full((4, 4, 3), 100, np.uint8)}

RAISES = """
kinds = {{'MXNetError': mx.base.MXNetError, 'ValueError': ValueError, 'TypeError': TypeError,
          'IndexError': IndexError, 'FileNotFoundError': FileNotFoundError,
          'ZeroDivisionError': ZeroDivisionError, 'RuntimeError': RuntimeError}}
try:
{call}
    result['raised'] = []
except Exception as err:
    result['raised'] = sorted(name for name, kind in kinds.items() if isinstance(err, kind))
"""

CALLS = {
    "moveaxis_source_out_of_range": "nd.moveaxis(nd.ones((1, 2, 3)), 3, 0)",
    "moveaxis_negative_out_of_range": "nd.moveaxis(nd.ones((1, 2, 3)), -4, 0)",
    "moveaxis_destination_out_of_range": "nd.moveaxis(nd.ones((1, 2, 3)), 0, 5)",
    "moveaxis_repeated_axis": "nd.moveaxis(nd.ones((1, 2, 3)), [0, 0], [0, 1])",
    "moveaxis_in_range": "nd.moveaxis(nd.ones((1, 2, 3)), -1, 0)",
    "broadcast_like_empty_axes": "nd.broadcast_like(nd.ones((1, 2)), nd.ones((3, 2)), lhs_axes=(), rhs_axes=())",
    "normal_negative_scale": "nd.random.normal(0, -1, shape=(2,)).asnumpy()",
    "normal_zero_scale": "nd.random.normal(0, 0, shape=(2,)).asnumpy()",
    "uniform_high_below_low": "nd.random.uniform(1, 0.5, shape=(2,)).asnumpy()",
    "uniform_high_equal_low": "nd.random.uniform(1, 1, shape=(2,)).asnumpy()",
    "gamma_negative_alpha": "nd.random.gamma(-1, 1, shape=(2,)).asnumpy()",
    "gamma_zero_beta": "nd.random.gamma(1, 0, shape=(2,)).asnumpy()",
    "exponential_negative_scale": "nd.random.exponential(-1, shape=(2,)).asnumpy()",
    "exponential_zero_scale": "nd.random.exponential(0, shape=(2,)).asnumpy()",
    "poisson_negative": "nd.random.poisson(-0.1, shape=(2,)).asnumpy()",
    "poisson_zero": "nd.random.poisson(0, shape=(2,)).asnumpy()",
    "negative_binomial_negative_k": "nd.random.negative_binomial(-1, 0.5, shape=(2,)).asnumpy()",
    "negative_binomial_fractional_k": "nd.random.negative_binomial(1.5, 0.5, shape=(2,)).asnumpy()",
    "negative_binomial_p_above_one": "nd.random.negative_binomial(1, 1.5, shape=(2,)).asnumpy()",
    "generalized_negative_binomial_negative_mu": "nd.random.generalized_negative_binomial(-1, 1, shape=(2,)).asnumpy()",
    "randint_high_below_low": "nd.random.randint(5, 1, shape=(2,)).asnumpy()",
    "normal_array_negative_scale": "nd.random.normal(nd.array([0.0]), nd.array([-1.0]), shape=(2,)).asnumpy()",
    "np_normal_negative_scale": "mx.np.random.normal(0, -1, size=(2,)).asnumpy()",
    "imresize_interp_minus_one": "mx.image.imresize(nd.array(inputs['pixels'], dtype='uint8'), 2, 3, interp=-1).asnumpy()",
    "imresize_interp_nine": "mx.image.imresize(nd.array(inputs['pixels'], dtype='uint8'), 2, 3, interp=9).asnumpy()",
    "imresize_interp_five": "mx.image.imresize(nd.array(inputs['pixels'], dtype='uint8'), 2, 3, interp=5)",
    "imdecode_empty": "mx.image.imdecode(b'')",
    "imdecode_garbage": "mx.image.imdecode(b'clearly not image content')",
    "imread_missing_file": "mx.image.imread('/nonexistent/dir/blah.jpg')",
    "seed_float": "mx.random.seed(1.5)",
    "seed_negative": "mx.random.seed(-1)",
    "seed_huge": "mx.random.seed(2 ** 64)",
    "seed_bool": "mx.random.seed(True)",
    "keyword_ignored_binary": "nd.broadcast_maximum(nd.ones((2,)), nd.ones((2,)), axis=1)",
    "keyword_ignored_unary": "nd.relu(nd.ones((2,)), axis=1)",
}

# writes under autograd.record(): MXNet refuses those that cannot be recorded in place
RECORDED = {
    "setitem_into_graph_variable": ("x = nd.ones((3,)); x.attach_grad()", "x[1] = 5"),
    "setitem_gradient_value_at_index": ("x = nd.zeros((3, 2)); y = nd.ones((2,)); y.attach_grad()", "x[1] = y"),
    "setitem_gradient_value_at_slice": ("x = nd.zeros((3, 2)); y = nd.ones((1, 2)); y.attach_grad()", "x[1:2] = y"),
    "setitem_gradient_value_advanced": ("x = nd.zeros((3, 2)); y = nd.ones((2, 2)); y.attach_grad()", "x[[0, 1]] = y"),
    "setitem_gradient_value_whole": ("x = nd.zeros((3, 2)); y = nd.ones((3, 2)); y.attach_grad()", "x[:] = y"),
    "setitem_gradient_value_ellipsis": ("x = nd.zeros((3, 2)); y = nd.ones((3, 2)); y.attach_grad()", "x[...] = y"),
    "setitem_plain_value": ("x = nd.zeros((3, 2)); y = nd.ones((2,))", "x[1] = y"),
    "setitem_number": ("x = nd.zeros((3, 2))", "x[1:2] = 3"),
    "add_in_place_gradient_value": ("x = nd.zeros((2,)); y = nd.ones((2,)); y.attach_grad()", "x += y"),
    "add_in_place_into_variable": ("x = nd.zeros((2,)); x.attach_grad()", "x += 1"),
    "add_in_place_plain": ("x = nd.zeros((2,)); y = nd.ones((2,))", "x += y"),
}

CASES = {name: RAISES.format(call="    " + call) for name, call in CALLS.items()}
for _name, (_setup, _write) in RECORDED.items():
    CASES[_name] = _setup + "\n" + RAISES.format(
        call=f"    with autograd.record():\n        {_write}")


@pytest.fixture(scope="module")
def mxnet():
    return oracle_results(CASES, INPUTS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_raises_where_mxnet_raises_and_as_catchably(mxnet, name: str) -> None:
    ours, theirs = compare(CASES, name, INPUTS, mxnet)
    assert bool(ours["raised"]) == bool(theirs["raised"]), (ours, theirs)
    missing = set(theirs["raised"]) - set(ours["raised"])
    assert not missing, f"MXNet's error is a {theirs['raised']}, the engine's a {ours['raised']}"
