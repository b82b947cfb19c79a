# ruff: noqa: E501 - each case is one expression string shared verbatim with MXNet
"""Loss-output operators against MXNet 1.9.1: forward values and the gradients they send
back (``SoftmaxOutput``, ``*RegressionOutput``, ``MakeLoss``, ``SVMOutput``)."""

from __future__ import annotations

import numpy as np
import pytest

from engine import autograd, nd
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

_rng = np.random.default_rng(5)
INPUTS = {
    "x": _rng.uniform(-2, 2, (4, 3)).astype(np.float32),
    "cls": np.array([0, 2, 1, 2], np.float32),
    "cls_ignore": np.array([0, -1, 1, 2], np.float32),
    "y": _rng.uniform(-1, 1, (4, 3)).astype(np.float32),
}
CASES = {
    "softmax_output": "nd.SoftmaxOutput(X, nd.array(inputs['cls']))",
    "softmax_output_scaled": "nd.SoftmaxOutput(X, nd.array(inputs['cls']), grad_scale=0.5, normalization='batch')",
    "softmax_output_ignore": "nd.SoftmaxOutput(X, nd.array(inputs['cls_ignore']), use_ignore=True, ignore_label=-1, normalization='valid')",
    "softmax_output_smooth": "nd.SoftmaxOutput(X, nd.array(inputs['cls']), smooth_alpha=0.1)",
    # beyond 2-D: last axis with preserve_shape, axis 1 with multi_output; a label of the
    # data's size is a probability target
    "softmax_output_preserve": "nd.SoftmaxOutput(X.reshape((2, 2, 3)), nd.array([[0, 2], [1, 1]]), preserve_shape=True)",
    "softmax_output_multi": "nd.SoftmaxOutput(X.reshape((2, 3, 2)), nd.array([[0, 2], [1, 1]]), multi_output=True, normalization='valid')",
    "softmax_output_probability": "nd.SoftmaxOutput(X, nd.softmax(nd.array(inputs['y'])), grad_scale=2.0)",
    "linear_regression": "nd.LinearRegressionOutput(X, nd.array(inputs['y']), grad_scale=2.0)",
    "logistic_regression": "nd.LogisticRegressionOutput(X, nd.array(inputs['y']))",
    "mae_regression": "nd.MAERegressionOutput(X, nd.array(inputs['y']))",
    "make_loss": "nd.MakeLoss(X * X, grad_scale=0.3)",
    "make_loss_batch": "nd.make_loss(X * X, normalization='batch')",
    "svm_l2": "nd.SVMOutput(X, nd.array(inputs['cls']), margin=0.5, regularization_coefficient=0.7)",
    "svm_l1": "nd.SVMOutput(X, nd.array(inputs['cls']), use_linear=True)",
}

SNIPPET = f"""
for name, expr in {CASES!r}.items():
    X = nd.array(inputs['x']); X.attach_grad()
    AVG = nd.full((3,), 0.3)
    with autograd.record():
        out = eval(expr)
    out.backward()
    outputs[name] = out
    outputs[name + '_grad'] = X.grad
    outputs[name + '_avg'] = AVG
"""


@pytest.fixture(scope="module")
def oracle():
    return run_mxnet(SNIPPET, INPUTS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_output_operator_matches_mxnet(oracle, name: str) -> None:
    X = nd.array(INPUTS["x"])  # noqa: N806 - the name the shared expressions use
    X.attach_grad()
    AVG = nd.full((3,), 0.3)  # noqa: N806
    with autograd.record():
        # the expressions are this module's constants, shared with the MXNet snippet
        out = eval(CASES[name], {"nd": nd, "X": X, "AVG": AVG, "inputs": INPUTS})  # noqa: S307
    out.backward()
    np.testing.assert_allclose(out.asnumpy(), oracle[name], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(X.grad.asnumpy(), oracle[name + "_grad"], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(AVG.asnumpy(), oracle[name + "_avg"], rtol=1e-6)


def test_kl_sparse_regulariser_gradient_and_moving_average() -> None:
    # MXNet 1.9.1's nd form cannot be called (it wants the auxiliary moving average but
    # accepts no argument for it), so this checks the kernel's formula directly
    x = np.array([[0.2, 0.6], [0.4, 0.2]], np.float32)
    data = nd.array(x)
    data.attach_grad()
    avg = nd.full((2,), 0.3)
    with autograd.record():
        out = nd.IdentityAttachKLSparseReg(data, avg, sparseness_target=0.1, penalty=0.01,
                                           momentum=0.9)
    out.backward()
    moving = 0.9 * 0.3 + 0.1 * x.mean(axis=0)
    np.testing.assert_allclose(avg.asnumpy(), moving, rtol=1e-6)
    extra = 0.01 * (-0.1 / moving + 0.9 / (1 - moving))
    np.testing.assert_allclose(data.grad.asnumpy(), 1 + np.broadcast_to(extra, x.shape),
                               rtol=1e-5)
    np.testing.assert_array_equal(out.asnumpy(), x)


def test_softmax_output_with_one_label_per_inner_row_names_the_flag_to_use() -> None:
    # MXNet 1.9.1 accepts (N, d1) labels for (N, d1, d2) data, then reads only the first N
    # labels in backward; the engine says which flag the labels fit instead
    x = nd.array(INPUTS["x"].reshape(2, 2, 3))
    x.attach_grad()
    with autograd.record():
        out = nd.SoftmaxOutput(x, nd.array([[0, 2], [1, 1]]))
    with pytest.raises(ValueError, match="preserve_shape"):
        out.backward()
