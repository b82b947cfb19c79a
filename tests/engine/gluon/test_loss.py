"""gluon.loss: per-sample values as MXNet defines them, weight/sample_weight/batch_axis,
numerical gradients (float64), and the loss registry."""

import numpy as np
import pytest

from engine import autograd, nd
from engine.gluon import loss as gloss
from tests.engine.gradcheck import CONTEXTS, check_grad

rng = np.random.default_rng(2)
pred = rng.standard_normal((4, 3))
target = rng.standard_normal((4, 3))
classes = np.array([0, 2, 1, 2])
probs = rng.dirichlet(np.ones(3), size=4)
binary = (rng.uniform(size=(4, 3)) > 0.5).astype(np.float64)


def log_softmax(x):
    z = x - x.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


CASES = {
    "l2": (gloss.L2Loss(), pred, target, (0.5 * (pred - target) ** 2).mean(1)),
    "l2_weight": (gloss.L2Loss(weight=3.0), pred, target, (1.5 * (pred - target) ** 2).mean(1)),
    "l1": (gloss.L1Loss(), pred, target, np.abs(pred - target).mean(1)),
    "softmax_ce_sparse": (gloss.SoftmaxCrossEntropyLoss(), pred, classes,
                          -log_softmax(pred)[np.arange(4), classes]),
    "softmax_ce_dense": (gloss.SoftmaxCrossEntropyLoss(sparse_label=False), pred, probs,
                         -(log_softmax(pred) * probs).sum(1)),
    "softmax_ce_from_logits": (gloss.SoftmaxCELoss(from_logits=True), pred, classes,
                               -pred[np.arange(4), classes]),
    "sigmoid_bce": (gloss.SigmoidBinaryCrossEntropyLoss(), pred, binary,
                    -(binary * np.log(sigmoid(pred)) + (1 - binary) * np.log(1 - sigmoid(pred)))
                    .mean(1)),
    "sigmoid_bce_from_sigmoid": (gloss.SigmoidBCELoss(from_sigmoid=True), sigmoid(pred), binary,
                                 -(binary * np.log(sigmoid(pred)) + (1 - binary)
                                   * np.log(1 - sigmoid(pred))).mean(1)),
    "huber": (gloss.HuberLoss(rho=0.5), pred, target,
              np.where(np.abs(pred - target) > 0.5, np.abs(pred - target) - 0.25,
                       (pred - target) ** 2).mean(1)),
    # MXNet 1.9 sums KL over the classes (its docstring says mean)
    "kl_div_from_logits": (gloss.KLDivLoss(), log_softmax(pred), probs,
                           (probs * (np.log(probs + 1e-12) - log_softmax(pred))).sum(1)),
    "kl_div_scores": (gloss.KLDivLoss(from_logits=False), pred, probs,
                      (probs * (np.log(probs + 1e-12) - log_softmax(pred))).sum(1)),
    "hinge": (gloss.HingeLoss(), pred, 2 * binary - 1,
              np.maximum(0, 1 - pred * (2 * binary - 1)).mean(1)),
    "logistic": (gloss.LogisticLoss(label_format="binary"), pred, binary,
                 np.log1p(np.exp(-pred * (2 * binary - 1))).mean(1)),
}


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_loss_values_and_gradients(name, ctx):
    loss, x, label, want = CASES[name]
    got = loss(nd.array(x, ctx=ctx, dtype="float64"), nd.array(label, ctx=ctx, dtype="float64"))
    assert got.shape == (4,)
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-7, atol=1e-10)
    check_grad(lambda p, lab: loss(p, lab), [x, label], wrt=[0], ctx=ctx)


def test_sample_weight_and_batch_axis():
    l2 = gloss.L2Loss()
    sw = np.array([[1.0], [0.0], [2.0], [1.0]])
    got = l2(nd.array(pred), nd.array(target), nd.array(sw)).asnumpy()
    np.testing.assert_allclose(got, (0.5 * (pred - target) ** 2 * sw).mean(1), rtol=1e-6)
    ce = gloss.SoftmaxCrossEntropyLoss()
    weighted = ce(nd.array(pred), nd.array(classes), sample_weight=nd.array(sw)).asnumpy()
    np.testing.assert_allclose(weighted, -log_softmax(pred)[np.arange(4), classes] * sw[:, 0],
                               rtol=1e-5)
    by_column = gloss.L1Loss(batch_axis=1)(nd.array(pred), nd.array(target)).asnumpy()
    np.testing.assert_allclose(by_column, np.abs(pred - target).mean(0), rtol=1e-6)
    seq = rng.standard_normal((2, 5, 3))
    seq_labels = rng.integers(0, 3, (2, 5))
    per_sample = ce(nd.array(seq), nd.array(seq_labels)).asnumpy()
    want = -np.take_along_axis(log_softmax(seq), seq_labels[..., None], -1)[..., 0].mean(1)
    np.testing.assert_allclose(per_sample, want, rtol=1e-5)
    with pytest.raises(TypeError, match="weight must be a number"):
        gloss.L1Loss(weight=nd.ones(1))(nd.array(pred), nd.array(target))


def test_bce_pos_weight_and_extreme_logits():
    bce = gloss.SigmoidBinaryCrossEntropyLoss()
    pw = np.array([2.0, 1.0, 0.5])
    got = bce(nd.array(pred), nd.array(binary), None, nd.array(pw)).asnumpy()
    want = -(pw * binary * np.log(sigmoid(pred)) + (1 - binary) * np.log(1 - sigmoid(pred)))
    np.testing.assert_allclose(got, want.mean(1), rtol=1e-5)
    big = bce(nd.array([[1000.0, -1000.0]]), nd.array([[0.0, 1.0]])).asnumpy()
    np.testing.assert_allclose(big, [1000.0])


def test_fused_softmax_ce_matches_log_softmax_pick():
    x = nd.array(pred)
    x.attach_grad()
    with autograd.record():
        fused = gloss.SoftmaxCrossEntropyLoss()(x, nd.array(classes)).sum()
    fused.backward()
    fused_grad = x.grad.asnumpy()
    with autograd.record():
        plain = gloss.SoftmaxCrossEntropyLoss(from_logits=True)(
            nd.log_softmax(x), nd.array(classes)).sum()
    plain.backward()
    np.testing.assert_allclose(fused.asscalar(), plain.asscalar(), rtol=1e-6)
    np.testing.assert_allclose(fused_grad, x.grad.asnumpy(), rtol=1e-5, atol=1e-7)


def test_loss_registry():
    assert isinstance(gloss.create("softmax_cross_entropy"), gloss.SoftmaxCrossEntropyLoss)
    assert isinstance(gloss.create("SoftmaxCELoss"), gloss.SoftmaxCrossEntropyLoss)
    assert gloss.create("L2", weight=2.0)._weight == 2.0
    for name in ("l1", "sigmoid_binary_cross_entropy", "huber", "kl_div", "HuberLoss"):
        assert isinstance(gloss.create(name), gloss.Loss)
    with pytest.raises(ValueError, match="unknown loss 'cross_entropy'.*softmax_cross_entropy"):
        gloss.create("cross_entropy")
