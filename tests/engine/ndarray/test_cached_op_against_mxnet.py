"""``nd.CachedOp`` against MXNet 1.9.1: a symbol called as one operator, with ``out=`` and
gradients to its inputs."""

from __future__ import annotations

import numpy as np

import engine as mx
from engine import autograd, nd
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

_rng = np.random.default_rng(2)
INPUTS = {"data": _rng.uniform(-1, 1, (2, 3, 6, 6)).astype(np.float32),
          "weight": _rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32),
          "bias": _rng.uniform(-1, 1, (4,)).astype(np.float32)}

SNIPPET = """
sym = mx.sym.Convolution(kernel=(3, 3), num_filter=4) * 2 + 1
result['inputs'] = sym.list_inputs()
op = nd.CachedOp(sym)
data, weight, bias = (nd.array(inputs[k]) for k in ('data', 'weight', 'bias'))
outputs['plain'] = op(data, weight, bias)
target = nd.zeros(outputs['plain'].shape)
op(data, weight, bias, out=target)
outputs['into'] = target
weight.attach_grad(); bias.attach_grad()
with autograd.record():
    y = op(data, weight, bias)
    (y * y).sum().backward()
outputs['dweight'] = weight.grad; outputs['dbias'] = bias.grad
"""


def test_cached_op_matches_mxnet() -> None:
    theirs = run_mxnet(SNIPPET, INPUTS)
    sym = mx.sym.Convolution(kernel=(3, 3), num_filter=4) * 2 + 1
    assert sym.list_inputs() == theirs.json["inputs"]
    op = nd.CachedOp(sym)
    data, weight, bias = (nd.array(INPUTS[k]) for k in ("data", "weight", "bias"))
    np.testing.assert_allclose(op(data, weight, bias).asnumpy(), theirs["plain"], rtol=1e-5,
                               atol=1e-5)
    target = nd.zeros(theirs["plain"].shape)
    assert op(data, weight, bias, out=target) is target
    np.testing.assert_allclose(target.asnumpy(), theirs["into"], rtol=1e-5, atol=1e-5)
    weight.attach_grad()
    bias.attach_grad()
    with autograd.record():
        y = op(data, weight, bias)
        (y * y).sum().backward()
    np.testing.assert_allclose(weight.grad.asnumpy(), theirs["dweight"], rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(bias.grad.asnumpy(), theirs["dbias"], rtol=1e-4, atol=1e-3)
