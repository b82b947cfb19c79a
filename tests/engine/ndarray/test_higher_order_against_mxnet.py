"""Second-order gradients and the gelqf gradient against MXNet 1.9.1: MXNet's sign for
arcsinh/arccosh, zero second derivatives through clip and Dropout, FullyConnected's
weight-data cross terms, and the LQ factorisation's backward.

Each case is MXNet source run unchanged in MXNet (one process) and in the engine.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.gluon.differential import assert_same_results, oracle_fixture
from tests.oracle import needs_mxnet

_RNG = np.random.RandomState(7)
INPUTS = {"x": _RNG.uniform(-2, 2, (3, 4)).astype(np.float32),
          "pos": _RNG.uniform(1.5, 4, (3, 4)).astype(np.float32),
          "head": _RNG.uniform(0.5, 1.5, (3, 4)).astype(np.float32),
          "a": _RNG.normal(size=(2, 3, 4)).astype(np.float64),
          "gq": _RNG.normal(size=(2, 3, 4)).astype(np.float64),
          "gl": _RNG.normal(size=(2, 3, 3)).astype(np.float64),
          "data": _RNG.uniform(-1, 1, (2, 3, 4)).astype(np.float32)}

_SECOND = """
def second(fn, x, head):
    x = mx.nd.array(x)
    x.attach_grad()
    with mx.autograd.record():
        y = fn(x)
        g = mx.autograd.grad(y, [x], head_grads=mx.nd.array(head), create_graph=True,
                             retain_graph=True)[0]
    g.backward(mx.nd.ones_like(g) * 3)
    return g, x.grad
"""

CASES = {
    "unary": _SECOND + """
for name, fn, x in (('arcsinh', mx.nd.arcsinh, inputs['x']),
                    ('arccosh', mx.nd.arccosh, inputs['pos']),
                    ('arctanh', mx.nd.arctanh, inputs['x'] / 3),
                    ('sigmoid', mx.nd.sigmoid, inputs['x']),
                    ('clip', lambda v: mx.nd.clip(v, -0.5, 1.0), inputs['x'])):
    outputs[name + '_first'], outputs[name + '_second'] = second(fn, x, inputs['head'])
# clip's gradient, differentiated with create_graph (what MXNet's check_nth_order does)
x = mx.nd.array(inputs['x'])
x.attach_grad()
with mx.autograd.record():
    g1 = mx.autograd.grad(mx.nd.clip(x, -0.5, 1.0), [x], create_graph=True,
                          retain_graph=True)[0]
    g2 = mx.autograd.grad(g1, [x], head_grads=mx.nd.ones_like(g1), create_graph=True,
                          retain_graph=True)[0]
outputs['clip_nth'] = g2
""",
    "dropout": """
mx.random.seed(1)
x = mx.nd.array(inputs['x']); x.attach_grad()
with mx.autograd.record():
    y = mx.nd.Dropout(x, p=0.5)
    g = mx.autograd.grad(y, [x], create_graph=True, retain_graph=True)[0]
g.backward()
outputs['masked_second'] = x.grad  # zero: the mask is a constant
""",
    "fully_connected": """
for flatten in (True, False):
    x = mx.nd.array(inputs['data'])
    k = 12 if flatten else 4
    w = mx.nd.array(np.linspace(-1, 1, 2 * k).reshape(2, k).astype(np.float32))
    b = mx.nd.array([0.1, -0.2])
    for arr in (x, w, b):
        arr.attach_grad()
    with mx.autograd.record():
        y = mx.nd.FullyConnected(x, w, b, num_hidden=2, flatten=flatten)
        head = mx.nd.arange(y.size).reshape(y.shape) / 10
        gx = mx.autograd.grad(y, [x], head_grads=head, create_graph=True,
                              retain_graph=True)[0]
        gw = mx.autograd.grad(gx, [w], head_grads=mx.nd.ones_like(gx),
                              create_graph=False, retain_graph=True)[0]
        grad_w = mx.autograd.grad(y, [w], head_grads=head, create_graph=True,
                                  retain_graph=True)[0]
        gx2 = mx.autograd.grad(grad_w, [x], head_grads=mx.nd.ones_like(grad_w),
                               create_graph=False)[0]
    key = 'flat' if flatten else 'last'
    outputs[key + '_gx'], outputs[key + '_gw'], outputs[key + '_gx2'] = gx, gw, gx2
""",
    "gelqf": """
a = mx.nd.array(inputs['a'], dtype=np.float64)
a.attach_grad()
with mx.autograd.record():
    q, l = mx.nd.linalg.gelqf(a)
    loss = (q * mx.nd.array(inputs['gq'], dtype=np.float64)).sum() + \\
        (l * mx.nd.array(inputs['gl'], dtype=np.float64)).sum()
loss.backward()
outputs['q'], outputs['l'], outputs['grad'] = q, l, a.grad
a32 = mx.nd.array(inputs['a'][0, :2, :3].astype(np.float32))
a32.attach_grad()
with mx.autograd.record():
    total = mx.nd.sum(mx.nd.linalg.gelqf(a32)[1])
total.backward()
outputs['grad32'] = a32.grad
""",
}


mxnet = oracle_fixture(CASES, INPUTS)


@needs_mxnet
@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_match_mxnet(name, mxnet):
    assert_same_results(CASES, name, INPUTS, mxnet)
