"""Numerical gradient checks (float64 central differences) for every core op."""

import numpy as np
import pytest

from engine import nd
from engine.ndarray import nn_ops
from tests.engine.gradcheck import CONTEXTS, check_grad

rng = np.random.default_rng(0)


def r(*shape, positive=False):
    x = rng.standard_normal(shape)
    return np.abs(x) + 0.5 if positive else x


BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a**b,
    "maximum": nd.maximum,
    "minimum": nd.minimum,
}


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_ops_with_broadcasting(name, ctx):
    check_grad(BINARY[name], [r(3, 4, positive=True), r(1, 4, positive=True)], ctx=ctx)
    check_grad(lambda a: BINARY[name](a, 1.7), [r(2, 3, positive=True)], ctx=ctx)
    check_grad(lambda a: BINARY[name](2.3, a), [r(2, 3, positive=True)], ctx=ctx)


UNARY = ["negative", "abs", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "square",
         "reciprocal", "sin", "cos", "tanh", "sigmoid", "relu", "softsign", "softrelu"]


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("name", UNARY)
def test_unary_ops(name, ctx):
    positive = name in {"log", "sqrt", "rsqrt", "reciprocal", "log1p"}
    x = r(3, 5, positive=positive)
    if name in {"abs", "relu"}:
        x = np.where(np.abs(x) < 1e-3, 0.5, x)  # keep away from the kink
    check_grad(lambda a: getattr(a, name)(), [x], ctx=ctx)


@pytest.mark.parametrize("ctx", CONTEXTS)
def test_reductions(ctx):
    x = r(3, 4, 5)
    check_grad(lambda a: a.sum(axis=1), [x], ctx=ctx)
    check_grad(lambda a: a.sum(axis=(0, 2), keepdims=True), [x], ctx=ctx)
    check_grad(lambda a: nd.sum(a, axis=1, exclude=True), [x], ctx=ctx)
    check_grad(lambda a: a.mean(), [x], ctx=ctx)
    check_grad(lambda a: a.mean(axis=-1), [x], ctx=ctx)
    check_grad(lambda a: a.max(axis=2), [x], ctx=ctx)
    check_grad(lambda a: a.min(axis=0), [x], ctx=ctx)
    check_grad(lambda a: a.prod(axis=1), [r(2, 3, positive=True)], ctx=ctx)
    check_grad(lambda a: nd.norm(a), [x], ctx=ctx)


@pytest.mark.parametrize("ctx", CONTEXTS)
def test_shape_and_indexing_ops(ctx):
    x = r(2, 3, 4)
    check_grad(lambda a: a.reshape((0, -1)), [x], ctx=ctx)
    check_grad(lambda a: a.transpose((2, 0, 1)), [x], ctx=ctx)
    check_grad(lambda a: nd.expand_dims(a, 1), [x], ctx=ctx)
    check_grad(lambda a: a[:, 1:, ::2], [x], ctx=ctx)
    check_grad(lambda a: a[1], [x], ctx=ctx)
    check_grad(lambda a: a[nd.array([0, 0, 1])], [x], ctx=ctx)  # repeated rows accumulate
    check_grad(lambda a: a.broadcast_to((2, 2, 3, 4)), [x], ctx=ctx)
    check_grad(lambda a: nd.tile(a, (2, 1, 1)), [x], ctx=ctx)
    check_grad(lambda a: nd.repeat(a, 2, axis=1), [x], ctx=ctx)
    check_grad(lambda a, b: nd.concat([a, b], axis=1), [x, r(2, 2, 4)], ctx=ctx)
    check_grad(lambda a, b: nd.stack([a, b], axis=1), [x, r(2, 3, 4)], ctx=ctx)
    check_grad(lambda a: nd.split(a, 2, axis=2)[1], [x], ctx=ctx)
    check_grad(lambda a: nd.take(a, nd.array([2, 0, 2]), axis=1), [x], ctx=ctx)
    check_grad(lambda a: nd.pick(a, nd.array([[0, 3, 1], [2, 2, 0]]), axis=2), [x], ctx=ctx)
    check_grad(lambda a: nd.clip(a, -0.5, 0.5), [x], ctx=ctx)
    check_grad(lambda a, b: nd.where(a > 0, a, b), [x, r(2, 3, 4)], ctx=ctx)


@pytest.mark.parametrize("ctx", CONTEXTS)
def test_matrix_products(ctx):
    check_grad(nd.dot, [r(3, 4), r(4, 5)], ctx=ctx)
    check_grad(lambda a, b: nd.dot(a, b, transpose_a=True, transpose_b=True),
               [r(4, 3), r(5, 4)], ctx=ctx)
    check_grad(nd.dot, [r(2, 3, 4), r(4, 2)], ctx=ctx)
    check_grad(nd.batch_dot, [r(2, 3, 4), r(2, 4, 5)], ctx=ctx)
    check_grad(lambda a, b: nd.batch_dot(a, b, transpose_b=True), [r(2, 3, 4), r(2, 5, 4)],
               ctx=ctx)


@pytest.mark.parametrize("ctx", CONTEXTS)
def test_nn_primitives(ctx):
    check_grad(lambda x, w, b: nd.FullyConnected(x, w, b, num_hidden=5),
               [r(4, 3), r(5, 3), r(5)], ctx=ctx)
    check_grad(lambda x, w: nd.FullyConnected(x, w, no_bias=True, num_hidden=5),
               [r(4, 2, 3), r(5, 6)], ctx=ctx)
    check_grad(lambda x, w, b: nd.FullyConnected(x, w, b, flatten=False),
               [r(2, 4, 3), r(5, 3), r(5)], ctx=ctx)
    for act in ("relu", "sigmoid", "tanh", "softrelu", "softsign", "log_sigmoid", "mish"):
        x = r(3, 4)
        x = np.where(np.abs(x) < 1e-3, 0.5, x)
        check_grad(lambda a, act=act: nd.Activation(a, act_type=act), [x], ctx=ctx)
    for act in ("leaky", "elu", "selu", "gelu"):
        check_grad(lambda a, act=act: nd.LeakyReLU(a, act_type=act, slope=0.1),
                   [r(3, 4) + 0.01], ctx=ctx)
    check_grad(lambda a, g: nd.LeakyReLU(a, act_type="prelu", gamma=g), [r(2, 3, 4), r(3)],
               ctx=ctx)
    check_grad(lambda a: nd.softmax(a, axis=1), [r(3, 4)], ctx=ctx)
    check_grad(lambda a: nd.softmax(a, temperature=2.0), [r(3, 4)], ctx=ctx)
    check_grad(lambda a: nd.log_softmax(a), [r(3, 4)], ctx=ctx)
    label = nd.array([0, 3, 1])
    check_grad(lambda a: nn_ops.softmax_cross_entropy_sparse(a, label), [r(3, 4)], ctx=ctx)
    check_grad(lambda a: nn_ops.softmax_cross_entropy_sparse(a, nd.array([[0, 1]]), axis=1),
               [r(1, 3, 2)], ctx=ctx)
    y = nd.array(rng.integers(0, 2, (3, 4)))
    check_grad(lambda a: nn_ops.sigmoid_bce_with_logits(a, y), [r(3, 4)], ctx=ctx)


def test_fused_cross_entropy_matches_log_softmax_pick():
    x = nd.array(r(5, 7), dtype="float64")
    label = nd.array([0, 6, 3, 3, 1])
    fused = nn_ops.softmax_cross_entropy_sparse(x, label).asnumpy()
    reference = -nd.pick(nd.log_softmax(x), label, axis=-1).asnumpy()
    np.testing.assert_allclose(fused, reference, rtol=1e-12)
    big = nd.array([[1000.0, -1000.0]])  # no overflow for large logits
    assert np.isfinite(nn_ops.softmax_cross_entropy_sparse(big, nd.array([1])).asnumpy()).all()


def test_dropout_is_identity_outside_training_and_scales_inside():
    from engine import autograd, random

    x = nd.ones((1000,))
    assert nd.Dropout(x, p=0.5) is x
    random.seed(1)
    with autograd.record():
        y = nd.Dropout(x, p=0.5)
    kept = y.asnumpy()
    assert set(np.unique(kept)) <= {0.0, 2.0}
    assert 0.4 < (kept > 0).mean() < 0.6
    with pytest.raises(ValueError, match="dropout rate"):
        nd.Dropout(x, p=1.0)


def test_one_hot():
    out = nd.one_hot(nd.array([0, 2, 1]), 3).asnumpy()
    np.testing.assert_array_equal(out, np.eye(3)[[0, 2, 1]])
