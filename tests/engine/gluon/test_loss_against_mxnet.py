"""Every gluon.loss class against MXNet 1.9.1: per-sample values and input gradients, with
``weight``, ``sample_weight`` and a non-default ``batch_axis``, and the registry of names."""

import numpy as np
import pytest

import engine
from tests.engine.gluon.differential import compare, oracle_results
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

rng = np.random.RandomState(11)
INPUTS = {k: np.asarray(v, dtype=np.float32) for k, v in {
    "ctc_pred": rng.randn(3, 6, 5), "ctc_label": [[1, 3, 3, -1], [0, 2, -1, -1], [2, 2, 2, 1]],
    "ctc_label_len": [3, 2, 1], "ctc_pred_len": [6, 4, 6], "ctc_short": [6, 4, 5],
    "sw3": rng.rand(3),
    "a": rng.randn(4, 5), "b": rng.randn(4, 5), "c": rng.randn(4, 5), "sign": [1, -1, -1, 1],
    "sw4": rng.rand(4, 1), "rate": rng.rand(4, 5) + 0.2, "counts": rng.poisson(2.0, (4, 5)) + 0.5,
    "p3": rng.randn(2, 4, 3), "l3": rng.randn(2, 4, 3), "bin3": (rng.rand(2, 4, 3) > 0.5) * 1.0,
    "cls3": rng.randint(0, 3, (2, 4)), "sw3d": rng.rand(1, 4, 1),
}.items()}

CASES = {
    "ctc": """
        L = gluon.loss
        specs = [(L.CTCLoss(), "ctc_label", False, False, None),
                 (L.CTCLoss(weight=0.5), "ctc_label", True, True, None),
                 (L.CTCLoss(layout="TNC", label_layout="TN"), "ctc_label", True, False, "sw3"),
                 (L.CTCLoss(), "ctc_label", False, True, "sw3")]
        for i, (loss, label, use_pred_len, use_label_len, sw) in enumerate(specs):
            pred = nd.array(inputs["ctc_pred"])
            lab = nd.array(inputs[label])
            if loss._layout == "TNC":
                pred = pred.swapaxes(0, 1)
                lab = lab.swapaxes(0, 1)
            pred.attach_grad()
            args = [nd.array(inputs["ctc_pred_len"]) if use_pred_len else None,
                    nd.array(inputs["ctc_label_len"]) if use_label_len else None,
                    nd.array(inputs[sw]) if sw else None]
            with autograd.record():
                out = loss(pred, lab, *args)
            out.backward(nd.array([1.0, 2.0, 0.5]))
            outputs.update({"l%d" % i: out, "g%d" % i: pred.grad})
        # a label no alignment fits (4 labels with 2 repeats need 6 frames, 5 given): loss 0;
        # forward only, as MXNet leaves that sample's gradient uninitialized
        short = L.CTCLoss()(nd.array(inputs["ctc_pred"]), nd.array(inputs["ctc_label"]),
                            nd.array(inputs["ctc_short"]))
        outputs["infeasible"] = short
    """,
    "cosine_embedding": """
        for i, (margin, weighted) in enumerate([(0, False), (0.2, True), (-0.3, False)]):
            loss = gluon.loss.CosineEmbeddingLoss(margin=margin, weight=0.7 if weighted else None)
            a, b = nd.array(inputs["a"]), nd.array(inputs["b"])
            a.attach_grad()
            b.attach_grad()
            extra = [nd.array(inputs["sw4"])] if weighted else []
            with autograd.record():
                out = loss(a, b, nd.array(inputs["sign"]), *extra)
            out.backward()
            outputs.update({"l%d" % i: out, "ga%d" % i: a.grad, "gb%d" % i: b.grad})
    """,
    "poisson_nll": """
        specs = [dict(), dict(from_logits=False), dict(compute_full=True, weight=0.3),
                 dict(from_logits=False, compute_full=True)]
        for i, kw in enumerate(specs):
            for weighted in (False, True):
                pred = nd.array(inputs["rate"] if not kw.get("from_logits", True) else inputs["a"])
                extra = [nd.array(inputs["sw4"])] if weighted else []
                loss = gluon.loss.PoissonNLLLoss(**kw)
                if kw.get("compute_full"):
                    # forward only: MXNet 1.9.1's compute_full multiplies in place, which
                    # its autograd refuses inside record()
                    outputs["l%d_%d" % (i, weighted)] = loss(pred, nd.array(inputs["counts"]),
                                                             *extra)
                    continue
                pred.attach_grad()
                with autograd.record():
                    out = loss(pred, nd.array(inputs["counts"]), *extra)
                out.backward()
                outputs.update({"l%d_%d" % (i, weighted): out, "g%d_%d" % (i, weighted): pred.grad})
    """,
    "triplet": """
        specs = [(gluon.loss.TripletLoss(), "a"),
                 (gluon.loss.TripletLoss(margin=3, weight=2.0), "a"),
                 (gluon.loss.TripletLoss(batch_axis=1), "p3")]
        for i, (loss, name) in enumerate(specs):
            x = nd.array(inputs[name])
            pos = nd.array(inputs["b"] if name == "a" else inputs["l3"])
            neg = nd.array(inputs["c"] if name == "a" else inputs["bin3"])
            for t in (x, pos, neg):
                t.attach_grad()
            with autograd.record():
                out = loss(x, pos, neg)
            out.backward()
            outputs.update({"l%d" % i: out, "gx%d" % i: x.grad, "gp%d" % i: pos.grad,
                            "gn%d" % i: neg.grad})
    """,
    "sdml": """
        for i, smoothing in enumerate([0.3, 0.1]):
            a, b = nd.array(inputs["a"]), nd.array(inputs["b"])
            a.attach_grad()
            b.attach_grad()
            with autograd.record():
                out = gluon.loss.SDMLLoss(smoothing_parameter=smoothing)(a, b)
            out.backward()
            outputs.update({"l%d" % i: out, "ga%d" % i: a.grad, "gb%d" % i: b.grad})
    """,
    "batch_axis_and_weights": """
        L = gluon.loss
        cases = [(L.L2Loss(weight=0.4, batch_axis=1), "l3"), (L.L1Loss(batch_axis=1), "l3"),
                 (L.SigmoidBinaryCrossEntropyLoss(batch_axis=1, weight=1.5), "bin3"),
                 (L.HuberLoss(rho=0.5, batch_axis=1), "l3"),
                 (L.HingeLoss(margin=0.5, batch_axis=1), "bin3"),
                 (L.SquaredHingeLoss(batch_axis=1, weight=0.2), "bin3"),
                 (L.LogisticLoss(batch_axis=1, label_format="binary"), "bin3"),
                 (L.KLDivLoss(from_logits=False, batch_axis=1), "bin3"),
                 (L.SoftmaxCrossEntropyLoss(batch_axis=1, weight=0.5), "cls3"),
                 (L.SoftmaxCrossEntropyLoss(sparse_label=False, axis=1), "bin3")]
        for i, (loss, label) in enumerate(cases):
            for weighted in (False, True):
                x = nd.array(inputs["p3"])
                x.attach_grad()
                extra = [nd.array(inputs["sw3d"])] if weighted else []
                if isinstance(loss, L.SoftmaxCrossEntropyLoss) and loss._sparse_label:
                    extra = [nd.array(inputs["sw3d"][:, :, 0])] if weighted else []
                with autograd.record():
                    out = loss(x, nd.array(inputs[label]), *extra)
                out.backward()
                outputs.update({"l%d_%d" % (i, weighted): out, "g%d_%d" % (i, weighted): x.grad})
    """,
}


@pytest.fixture(scope="module")
def mxnet():
    return oracle_results(CASES, INPUTS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_loss_values_and_gradients_match_mxnet(name, mxnet):
    compare(CASES, name, INPUTS, mxnet, rtol=1e-4, atol=2e-5)


def test_every_mxnet_loss_name_exists():
    run = run_mxnet("result['names'] = [n for n in dir(gluon.loss) if n.endswith('Loss')]")
    missing = [n for n in run.json["names"] if not hasattr(engine.gluon.loss, n)]
    assert missing == []


def test_new_losses_are_in_the_registry():
    for name in ("ctc", "cosine_embedding", "poisson_nll", "triplet", "sdml"):
        assert isinstance(engine.gluon.loss.create(name), engine.gluon.loss.Loss)
