"""engine.metric: MXNet 1.9 numbers on fixed inputs, global vs local stats, create()."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import pearsonr

import engine as mx
from engine import metric, nd
from tests.oracle import needs_mxnet, run_mxnet

PRED = nd.array([[0.3, 0.7], [0, 1.0], [0.4, 0.6]])
LABEL = nd.array([0, 1, 1])


def test_accuracy_argmaxes_scores_and_flattens_2d_labels():
    acc = metric.create("acc")
    acc.update([LABEL], [PRED])
    assert acc.get() == ("accuracy", 2 / 3)
    pred = nd.array([[0.3, 0.7], [0, 1.0], [0.4, 0.6], [0.8, 0.2], [0.3, 0.5], [0.6, 0.4]])
    label = nd.array([[0, 1, 1], [1, 0, 1]])
    acc = metric.Accuracy()
    acc.update([label], [pred])
    assert acc.get()[1] == pytest.approx(2 / 6)


def test_accuracy_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="does not match"):
        metric.Accuracy().update([LABEL, LABEL], [PRED])
    with pytest.raises(ValueError, match="does not match"):
        metric.Accuracy().update([nd.array([0, 1])], [PRED])


def test_global_stats_survive_reset_local():
    acc = metric.Accuracy()
    acc.update([nd.array([0, 1])], [nd.array([[0.9, 0.1], [0.2, 0.8]])])  # 2/2
    acc.reset_local()
    assert math.isnan(acc.get()[1])
    assert acc.get_global() == ("accuracy", 1.0)
    acc.update([nd.array([0, 1])], [nd.array([[0.1, 0.9], [0.2, 0.8]])])  # 1/2
    assert acc.get()[1] == 0.5
    assert acc.get_global()[1] == 0.75
    assert (acc.num_inst, acc.global_num_inst) == (2, 4)
    assert acc.get_global_name_value() == [("accuracy", 0.75)]
    acc.reset()
    assert math.isnan(acc.get_global()[1])


@pytest.mark.parametrize("name", ["mse", "mae", "rmse", "ce", "f1", "mcc", "pearsonr", "loss",
                                  "perplexity", "top_k_accuracy"])
def test_every_metric_keeps_global_stats_across_reset_local(name):
    kwargs = {"top_k": 2} if name == "top_k_accuracy" else {}
    rng = np.random.default_rng(0)
    m = metric.create(name, **kwargs)
    batches = []
    for _ in range(3):
        p = rng.random((6, 2)).astype(np.float32)
        p /= p.sum(1, keepdims=True)
        label = np.array([0, 1, 1, 0, 1, 0], dtype=np.float32)
        batches.append((label if name not in ("mse", "mae", "rmse", "pearsonr") else p[:, 0],
                        p if name not in ("mse", "mae", "rmse", "pearsonr") else p[:, 1]))
    whole = metric.create(name, **kwargs)
    for label, pred in batches:
        m.update([nd.array(label)], [nd.array(pred)])
        whole.update([nd.array(label)], [nd.array(pred)])
        m.reset_local()
    assert m.get_global()[1] == pytest.approx(whole.get()[1])
    assert math.isnan(m.get()[1])


def test_f1_counts_updates_for_macro_and_examples_for_micro():
    micro, macro = metric.create("f1", average="micro"), metric.F1(average="macro")
    assert math.isnan(macro.get()[1]) and math.isnan(micro.get()[1])
    zero_pred, zero_label = nd.array([[0.9, 0.1], [0.8, 0.2]]), nd.array([0, 0])
    micro.update([zero_label], [zero_pred])
    macro.update([zero_label], [zero_pred])
    assert micro.get()[1] == 0.0 and macro.get()[1] == 0.0
    micro.reset(), macro.reset()
    pred11, label11 = nd.array([[0.1, 0.9], [0.5, 0.5]]), nd.array([1, 0])
    pred12, label12 = nd.array([[0.85, 0.15], [1.0, 0.0]]), nd.array([1, 0])
    pred21, label21 = nd.array([[0.6, 0.4]]), nd.array([0])
    pred22, label22 = nd.array([[0.2, 0.8]]), nd.array([1])
    for m in (micro, macro):
        m.update([label11, label12], [pred11, pred12])
    assert (macro.num_inst, micro.num_inst) == (1, 4)
    fscore1 = 2.0 * 1 / (2 * 1 + 1 + 0)
    assert micro.get()[1] == pytest.approx(fscore1)
    assert macro.get()[1] == pytest.approx(fscore1)
    for m in (micro, macro):
        m.update([label21, label22], [pred21, pred22])
    assert (macro.num_inst, micro.num_inst) == (2, 6)
    fscore2 = 1.0
    fscore_total = 2.0 * 2 / (2 * 2 + 1 + 0)
    assert micro.get()[1] == pytest.approx(fscore_total)
    assert macro.get()[1] == pytest.approx((fscore1 + fscore2) / 2)


def test_f1_rejects_more_than_two_classes():
    with pytest.raises(ValueError, match="binary"):
        metric.F1().update([nd.array([0, 1, 2])], [nd.ones((3, 3))])


def test_mcc_matches_the_formula_and_pcc():
    mcc = metric.create("mcc", average="micro")
    pred11, label11 = nd.array([[0.1, 0.9], [0.5, 0.5]]), nd.array([1, 0])
    pred12, label12 = nd.array([[0.85, 0.15], [1.0, 0.0]]), nd.array([1, 0])
    mcc.update([label11, label12], [pred11, pred12])
    tp, fp, fn, tn = 1, 0, 1, 2
    expected = (tp * tn - fp * fn) / np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    assert mcc.num_inst == 4
    assert mcc.get()[1] == pytest.approx(expected)
    # a larger binary confusion matrix: MCC == PCC == Pearson of the hard predictions
    labels = np.array([0] * 10 + [1] * 7)
    hard = np.array([0] * 7 + [1] * 3 + [0] * 2 + [1] * 5)
    onehot = nd.array(np.eye(2)[hard])
    values = []
    for name in ("mcc", "pcc"):
        m = metric.create(name)
        m.update([nd.array(labels)], [onehot])
        values.append(m.get()[1])
    pear = metric.create("pearsonr")
    pear.update([nd.array(labels)], [nd.array(hard)])
    assert values[0] == pytest.approx(values[1]) == pytest.approx(pear.get()[1])


def test_single_array_regression_metrics():
    pred = nd.array([[1, 2, 3, 4]])
    label = pred + 0.1
    for name, expected in (("mse", 0.01), ("mae", 0.1), ("rmse", 0.1)):
        m = metric.create(name)
        m.update(label, pred)
        assert m.get()[1] == pytest.approx(expected, abs=1e-6)


def test_rmse_is_the_mean_of_per_batch_rmse():
    rmse = metric.RMSE()
    rmse.update([nd.array([0.0, 0.0])], [nd.array([1.0, 1.0])])
    rmse.update([nd.array([0.0, 0.0])], [nd.array([3.0, 3.0])])
    assert rmse.get()[1] == pytest.approx(2.0)  # not sqrt((1 + 9) / 2)
    assert rmse.num_inst == 2


def test_cross_entropy_nll_and_perplexity():
    for name, key in (("ce", "cross-entropy"), ("nll_loss", "nll-loss")):
        m = metric.create(name)
        m.update([LABEL], [PRED])
        assert m.get()[0] == key
        assert m.get()[1] == pytest.approx(-(np.log(0.3) + np.log(1.0) + np.log(0.6)) / 3)
    perp = metric.create("perplexity", ignore_label=None)
    perp.update([LABEL], [PRED])
    assert perp.get()[1] == pytest.approx(1.7710976285155853)
    ignoring = metric.Perplexity(ignore_label=1)
    ignoring.update([LABEL], [PRED])
    assert ignoring.num_inst == 1
    assert ignoring.get()[1] == pytest.approx(1 / 0.3)


def test_pearson_macro_and_micro_against_scipy():
    pred1, label1 = np.array([[0.3, 0.7], [0, 1.0], [0.4, 0.6]]), np.array([[1, 0], [0, 1], [0, 1]])
    pred2, label2 = np.array([[1, 2], [3, 2], [4, 6]]), np.array([[1, 0], [0, 1], [0, 1]])
    macro, micro = metric.create("pearsonr"), metric.PearsonCorrelation(average="micro")
    for m in (macro, micro):
        assert math.isnan(m.get()[1])
        m.update([nd.array(label1)], [nd.array(pred1)])
        m.update([nd.array(label2)], [nd.array(pred2)])
    r1 = pearsonr(pred1.ravel(), label1.ravel())[0]
    r2 = pearsonr(pred2.ravel(), label2.ravel())[0]
    both = pearsonr(np.concatenate([pred1.ravel(), pred2.ravel()]),
                    np.concatenate([label1.ravel(), label2.ravel()]))[0]
    assert macro.get()[1] == pytest.approx((r1 + r2) / 2)
    assert micro.get()[1] == pytest.approx(both)
    assert micro.get_global()[1] == pytest.approx(both)


def test_top_k_counts_label_among_best_k_and_1d_keeps_global_stats():
    m = metric.create("top_k_accuracy", top_k=2)
    assert m.name == "top_k_accuracy_2"
    m.update([nd.array([2, 0, 1])], [nd.array([[0.1, 0.5, 0.4], [0.2, 0.3, 0.5],
                                               [0.3, 0.6, 0.1]])])
    assert m.get()[1] == pytest.approx(2 / 3)
    one_d = metric.TopKAccuracy(top_k=2)
    one_d.update([nd.array([0, 1, 2])], [nd.array([0.1, 0.2, 0.7])])
    assert one_d.global_num_inst == 3
    assert one_d.get_global() == one_d.get()  # MXNet 1.x leaves global_sum at 0 here
    with pytest.raises(ValueError, match="top_k"):
        metric.TopKAccuracy(top_k=1)


def test_loss_metric_averages_values():
    m = metric.create("loss")
    m.update(None, [PRED])
    m2 = metric.Loss()
    m2.update(None, PRED)
    assert m.get()[1] == m2.get()[1] == pytest.approx(3.0 / 6)


def test_create_names_callables_lists_and_errors():
    assert isinstance(metric.create("ACC"), metric.Accuracy)
    assert isinstance(metric.create("cross-entropy"), metric.CrossEntropy)
    assert isinstance(metric.create("top_k_acc", top_k=3), metric.TopKAccuracy)
    composite = metric.create(["acc", "mse"])
    assert isinstance(composite, metric.CompositeEvalMetric)
    assert composite.get()[0] == ["accuracy", "mse"]

    def hits(label, pred):
        return float((pred.argmax(1) == label).mean())

    custom = metric.create(hits)
    custom.update([LABEL], [PRED])
    assert custom.get() == ("hits", pytest.approx(2 / 3))
    feval = metric.np(lambda label, pred: (float(abs(label - pred.argmax(1)).sum()), 3))
    feval.update([LABEL], [PRED])
    assert feval.name.startswith("custom(") and feval.get()[1] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="unknown metric 'acuracy'.*registered"):
        metric.create("acuracy")
    with pytest.raises(NotImplementedError):
        custom.get_config()


@pytest.mark.parametrize("args", [("acc",), ("f1",), ("mcc",), ("perplexity", -1),
                                  ("pearsonr",), ("nll_loss",), ("loss",),
                                  (["acc", "f1"],), ("top_k_accuracy", 3)])
def test_get_config_round_trips_through_json(args):
    m = metric.create(*args)
    again = metric.create(json.dumps(m.get_config()))
    assert again.get_config() == m.get_config()
    assert type(again) is type(m)


def test_composite_global_and_local():
    comp = metric.CompositeEvalMetric(["acc", "ce"])
    comp.update([LABEL], [PRED])
    comp.reset_local()
    names, values = comp.get_global()
    assert names == ["accuracy", "cross-entropy"]
    assert values[0] == pytest.approx(2 / 3)
    assert all(math.isnan(v) for v in comp.get()[1])
    assert comp.get_metric(1).name == "cross-entropy"


def test_labels_on_the_host_with_numpy_inputs():
    acc = mx.metric.Accuracy()
    acc.update([np.array([1, 0])], [np.array([[0.2, 0.8], [0.6, 0.4]])])
    assert acc.get()[1] == 1.0


@needs_mxnet
def test_metrics_match_mxnet_1_9():
    rng = np.random.default_rng(7)
    batches = []
    for _ in range(3):
        p = rng.random((8, 3)).astype(np.float32)
        batches.append((p / p.sum(1, keepdims=True), rng.integers(0, 3, 8).astype(np.float32)))
    binary = [(rng.random((8, 2)).astype(np.float32), rng.integers(0, 2, 8).astype(np.float32))
              for _ in range(3)]
    inputs = {}
    for i, (p, y) in enumerate(batches):
        inputs[f"p{i}"], inputs[f"y{i}"] = p, y
    for i, (p, y) in enumerate(binary):
        inputs[f"bp{i}"], inputs[f"by{i}"] = p, y
    specs = [("acc", {}, "m"), ("top_k_accuracy", {"top_k": 2}, "m"), ("ce", {}, "m"),
             ("nll_loss", {}, "m"), ("perplexity", {"ignore_label": 2}, "m"),
             ("mse", {}, "r"), ("mae", {}, "r"), ("rmse", {}, "r"), ("pearsonr", {}, "r"),
             ("f1", {}, "b"), ("f1", {"average": "micro"}, "b"), ("mcc", {}, "b"),
             ("mcc", {"average": "micro"}, "b"), ("loss", {}, "m")]
    code = "specs = " + repr(specs) + "\n" + (
        "vals = []\n"
        "for name, kw, kind in specs:\n"
        "    m = mx.metric.create(name, **kw)\n"
        "    for i in range(3):\n"
        "        if kind == 'b':\n"
        "            y, p = inputs['by%d' % i], inputs['bp%d' % i]\n"
        "        elif kind == 'r':\n"
        "            y, p = inputs['p%d' % i][:, 0], inputs['p%d' % i][:, 1]\n"
        "        else:\n"
        "            y, p = inputs['y%d' % i], inputs['p%d' % i]\n"
        "        m.update([nd.array(y)], [nd.array(p)])\n"
        "        if i == 1:\n"
        "            m.reset_local()\n"
        "    vals.append([float(m.get()[1]), float(m.get_global()[1])])\n"
        "result['vals'] = vals\n"
    )
    expected = run_mxnet(code, inputs).json["vals"]
    for (name, kw, kind), (local, glob) in zip(specs, expected, strict=True):
        m = metric.create(name, **kw)
        for i in range(3):
            if kind == "b":
                y, p = inputs[f"by{i}"], inputs[f"bp{i}"]
            elif kind == "r":
                y, p = inputs[f"p{i}"][:, 0], inputs[f"p{i}"][:, 1]
            else:
                y, p = inputs[f"y{i}"], inputs[f"p{i}"]
            m.update([nd.array(y)], [nd.array(p)])
            if i == 1:
                m.reset_local()
        assert m.get()[1] == pytest.approx(local, rel=1e-5), (name, kw)
        assert m.get_global()[1] == pytest.approx(glob, rel=1e-5), (name, kw)


GPU = pytest.param("gpu", id="cupy", marks=[
    pytest.mark.gpu,
    pytest.mark.skipif(mx.num_gpus() == 0, reason="needs cupy and a CUDA GPU")])


@pytest.mark.parametrize("device", ["cpu", GPU])
def test_metrics_on_the_device_match_the_host(device):
    ctx = mx.gpu(0) if device == "gpu" else mx.cpu()
    rng = np.random.default_rng(3)
    p = rng.random((16, 4)).astype(np.float32)
    p /= p.sum(1, keepdims=True)
    y = rng.integers(0, 4, 16).astype(np.float32)
    yb = (y > 1).astype(np.float32)
    for name, kw, label, pred in [("acc", {}, y, p), ("top_k_accuracy", {"top_k": 2}, y, p),
                                  ("ce", {}, y, p), ("perplexity", {"ignore_label": 0}, y, p),
                                  ("mse", {}, p[:, 0], p[:, 1]), ("rmse", {}, p[:, 0], p[:, 1]),
                                  ("pearsonr", {}, p[:, 0], p[:, 1]), ("f1", {}, yb, p[:, :2]),
                                  ("mcc", {}, yb, p[:, :2]), ("pcc", {}, y, p), ("loss", {}, y, p)]:
        on_device, on_host = metric.create(name, **kw), metric.create(name, **kw)
        # labels stay on the host, as a DataLoader yields them: the metric moves them
        on_device.update([nd.array(label)], [nd.array(pred, ctx=ctx)])
        on_host.update([label], [pred])
        assert on_device.get()[1] == pytest.approx(on_host.get()[1], rel=1e-5), name
        assert isinstance(on_device.get()[1], float), name


def test_cross_entropy_from_logits_equals_cross_entropy_of_the_softmax():
    logits = np.array([[2.0, -1.0, 0.5], [0.1, 0.2, 3.0]], np.float32)
    label = np.array([2, 0], np.float32)
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    from_logits = metric.create("ce", from_logits=True)
    from_logits.update([nd.array(label)], [nd.array(logits)])
    plain = metric.create("ce")
    plain.update([nd.array(label)], [nd.array(probs)])
    assert from_logits.get()[1] == pytest.approx(plain.get()[1], rel=1e-5)
    again = metric.create(json.dumps(from_logits.get_config()))
    assert again.from_logits
