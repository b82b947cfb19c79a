"""``autograd.Function`` and second-order ``autograd.grad(create_graph=True)`` against
MXNet 1.9.1."""

from __future__ import annotations

import numpy as np
import pytest

from engine import autograd, nd
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

X = np.array([0.3, 1.2, 2.5], np.float32)
SECOND_ORDER = ("sin", "cos", "tan", "tanh", "sigmoid", "log", "log2", "log10", "exp",
                "sqrt", "reciprocal", "abs", "relu", "arctan", "sinh", "cosh")

SNIPPET = f"""
class MulAdd(autograd.Function):
    def forward(self, x, y):
        self.save_for_backward(x, y)
        return x * y, x + y
    def backward(self, dz, dw):
        x, y = self.saved_tensors
        result['backward_recording'] = autograd.is_recording()
        return dz * y + dw, dz * x + dw
x = nd.array(inputs['x']); y = nd.array(inputs['x'] * 2)
x.attach_grad(); y.attach_grad()
f = MulAdd()
with autograd.record():
    z, w = f(x, y)
    loss = (z * z).sum() + 3 * w.sum()
loss.backward()
outputs['fn_x'] = x.grad; outputs['fn_y'] = y.grad
try:
    f(x, y)
    result['reuse'] = 'ok'
except Exception as err:
    result['reuse'] = type(err).__name__
for name in {SECOND_ORDER!r}:
    x = nd.array(inputs['x']); x.attach_grad()
    with autograd.record():
        y = getattr(nd, name)(x)
        dy = autograd.grad(y, [x], create_graph=True, retain_graph=True)[0]
    dy.backward()
    outputs['d1_' + name] = dy
    outputs['d2_' + name] = x.grad
"""


@pytest.fixture(scope="module")
def oracle():
    return run_mxnet(SNIPPET, {"x": X})


class MulAdd(autograd.Function):
    def forward(self, x, y):
        self.save_for_backward(x, y)
        return x * y, x + y

    def backward(self, dz, dw):
        x, y = self.saved_tensors
        self.recording_in_backward = autograd.is_recording()
        return dz * y + dw, dz * x + dw


def test_custom_function_gradients_match_mxnet(oracle) -> None:
    x, y = nd.array(X), nd.array(X * 2)
    x.attach_grad()
    y.attach_grad()
    f = MulAdd()
    with autograd.record():
        z, w = f(x, y)
        loss = (z * z).sum() + 3 * w.sum()
    loss.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), oracle["fn_x"], rtol=1e-6)
    np.testing.assert_allclose(y.grad.asnumpy(), oracle["fn_y"], rtol=1e-6)
    assert f.recording_in_backward == oracle.json["backward_recording"]
    assert oracle.json["reuse"] == "AssertionError"
    with pytest.raises(AssertionError):
        f(x, y)


def test_custom_function_outside_record_just_computes() -> None:
    z, w = MulAdd()(nd.array([2.0]), nd.array([5.0]))
    assert (z.asscalar(), w.asscalar()) == (10.0, 7.0)
    assert z._node is None


@pytest.mark.parametrize("name", SECOND_ORDER)
def test_second_order_gradient_matches_mxnet(oracle, name: str) -> None:
    x = nd.array(X)
    x.attach_grad()
    with autograd.record():
        y = getattr(nd, name)(x)
        dy = autograd.grad(y, [x], create_graph=True, retain_graph=True)[0]
    dy.backward()
    np.testing.assert_allclose(dy.asnumpy(), oracle["d1_" + name], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad.asnumpy(), oracle["d2_" + name], rtol=1e-4, atol=1e-5)


def test_second_order_through_products_and_sums() -> None:
    # MXNet 1.9.1 has no second-order rule for multiplication; the engine does: d²(x³) = 6x
    x = nd.array(X)
    x.attach_grad()
    with autograd.record():
        y = (x * x * x).sum() / 2
        dy = autograd.grad(y, [x], create_graph=True)[0]
        z = (dy * dy).mean()
    z.backward()
    # dy = 1.5x², z = mean(2.25x⁴), dz/dx = 9x³/3
    np.testing.assert_allclose(dy.asnumpy(), 1.5 * X**2, rtol=1e-6)
    np.testing.assert_allclose(x.grad.asnumpy(), 3 * X**3, rtol=1e-5)


def test_second_order_of_an_unsupported_op_says_so() -> None:
    x = nd.array(X)
    x.attach_grad()
    with autograd.record():
        y = nd.softmax(x)
        with pytest.raises(NotImplementedError, match="create_graph"):
            autograd.grad(y, [x], create_graph=True)
