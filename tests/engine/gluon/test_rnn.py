"""gluon.rnn against MXNet 1.9.1: cells, modifier cells and fused layers get the same
deterministic weights in both engines; outputs, final states and gradients (inputs, states,
every parameter) must agree, as must parameter names, state shapes and saved-file keys."""

import textwrap

import numpy as np
import pytest

from tests.engine.gluon.differential import compare, oracle_results
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

rng = np.random.RandomState(7)
INPUTS = {k: np.asarray(v, dtype=np.float32) for k, v in {
    "ntc": rng.randn(2, 4, 3), "tnc": rng.randn(4, 2, 3), "h": rng.randn(2, 5) * 0.5,
    "c": rng.randn(2, 5) * 0.5, "lh": rng.randn(4, 2, 5) * 0.5, "lc": rng.randn(4, 2, 5) * 0.5,
    "valid": np.array([2, 4]),
}.items()}

# deterministic weights: the same values land in the same parameter in both engines
PRELUDE = """
def fill(block):
    for k, p in enumerate(block.collect_params().values()):
        size = int(np.prod(p.shape))
        p.set_data(nd.array((np.sin(np.arange(size) * 0.37 + k) * 0.5).reshape(p.shape)))

def grads(block, tag, outputs):
    for k, p in enumerate(block.collect_params().values()):
        if p.grad_req != "null":
            outputs["%s_g%d" % (tag, k)] = p.grad()
"""

CASES = {
    "cells": """
        cells = [gluon.rnn.RNNCell(5, input_size=3), gluon.rnn.RNNCell(5, "relu", input_size=3),
                 gluon.rnn.LSTMCell(5, input_size=3), gluon.rnn.GRUCell(5, input_size=3)]
        for i, cell in enumerate(cells):
            cell.initialize()
            fill(cell)
            x = nd.array(inputs["ntc"])
            states = [nd.array(inputs["h"])] + ([nd.array(inputs["c"])] if i == 2 else [])
            for a in [x] + states:
                a.attach_grad()
            with autograd.record():
                out, new = cell.unroll(4, x, begin_state=states, layout="NTC",
                                       merge_outputs=True)
                total = (nd.cos(out) * out).sum() + sum((s * s).sum() for s in new)
            total.backward()
            outputs.update({"y%d" % i: out, "gx%d" % i: x.grad, "gh%d" % i: states[0].grad})
            for k, s in enumerate(new):
                outputs["s%d_%d" % (i, k)] = s
            grads(cell, "c%d" % i, outputs)
        result["names"] = [sorted(k.split("_", 1)[1] for k in c.collect_params()) for c in cells]
        result["info"] = [[list(d["shape"]) for d in c.state_info(3)] for c in cells]
        result["repr"] = [repr(c) for c in cells]
    """,
    "step_and_list_unroll": """
        cell = gluon.rnn.LSTMCell(5, input_size=3)
        cell.initialize()
        fill(cell)
        x = nd.array(inputs["tnc"])
        out, states = cell(x[0], cell.begin_state(batch_size=2))
        outputs.update({"step_out": out, "step_c": states[1]})
        outs, states = cell.unroll(4, [x[t] for t in range(4)], merge_outputs=False)
        result["list_len"] = len(outs)
        outputs.update({"o%d" % t: o for t, o in enumerate(outs)})
        merged, _ = cell.unroll(4, x, layout="TNC", merge_outputs=True)
        outputs["tnc"] = merged
    """,
    "layers": """
        specs = [(gluon.rnn.RNN, dict(activation="tanh")), (gluon.rnn.RNN, {}),
                 (gluon.rnn.LSTM, dict(num_layers=2, bidirectional=True)),
                 (gluon.rnn.GRU, dict(layout="NTC", num_layers=2)),
                 (gluon.rnn.GRU, dict(bidirectional=True, dropout=0.3))]
        for i, (cls, kw) in enumerate(specs):
            layer = cls(5, **kw)
            layer.initialize()
            x = nd.array(inputs["ntc"] if kw.get("layout") == "NTC" else inputs["tnc"])
            layer(x)
            fill(layer)
            n = layer._num_layers * layer._dir
            states = [nd.array(inputs["lh"][:n])]
            if cls is gluon.rnn.LSTM:
                states.append(nd.array(inputs["lc"][:n]))
            for a in [x] + states:
                a.attach_grad()
            with autograd.record():
                out, new = layer(x, states)
                total = (nd.cos(out) * out).sum() + sum((s * s).sum() for s in new)
            total.backward()
            outputs.update({"y%d" % i: out, "gx%d" % i: x.grad, "gh%d" % i: states[0].grad,
                            "plain%d" % i: layer(x)})
            for k, s in enumerate(new):
                outputs["s%d_%d" % (i, k)] = s
            grads(layer, "l%d" % i, outputs)
            result["repr%d" % i] = repr(layer)
            result["names%d" % i] = [k.split("_", 1)[1] for k in layer.collect_params()]
            result["saved%d" % i] = sorted(layer._collect_params_with_prefix().keys())
            result["begin%d" % i] = [list(s.shape) for s in layer.begin_state(batch_size=3)]
    """,
    "unfuse": """
        x = nd.array(inputs["tnc"])
        for i, layer in enumerate([gluon.rnn.LSTM(2, num_layers=3, bidirectional=True),
                                   gluon.rnn.GRU(4, num_layers=2, dropout=0.5, input_size=3),
                                   gluon.rnn.RNN(3, activation="tanh", input_size=3)]):
            cells = layer._unfuse()
            layer.initialize(mx.init.One() if i == 0 else mx.init.Uniform(0.5))
            if i:
                fill(layer)
            outputs["layer%d" % i] = layer(x)
            outputs["cells%d" % i] = cells.unroll(4, x, layout="TNC", merge_outputs=True)[0]
            result["shared%d" % i] = sorted(cells.collect_params()) == sorted(
                layer.collect_params())
    """,
    "state_shape_error": """
        layer = gluon.rnn.LSTM(5, input_size=3)
        layer.initialize()
        try:
            layer(nd.ones((4, 2, 3)), [nd.zeros((1, 3, 5)), nd.zeros((1, 3, 5))])
        except ValueError:
            result["error"] = "ValueError"
    """,
    "modifiers": """
        stack = gluon.rnn.SequentialRNNCell()
        with stack.name_scope():
            stack.add(gluon.rnn.LSTMCell(5, input_size=3))
            stack.add(gluon.rnn.DropoutCell(0.0))
            stack.add(gluon.rnn.ResidualCell(gluon.rnn.GRUCell(5, input_size=5)))
            stack.add(gluon.rnn.ZoneoutCell(gluon.rnn.RNNCell(5, input_size=5), 0.5, 0.5))
        hybrid = gluon.rnn.HybridSequentialRNNCell()
        with hybrid.name_scope():
            hybrid.add(gluon.rnn.GRUCell(4, input_size=3))
            hybrid.add(gluon.rnn.LSTMCell(5, input_size=4))
        bi = gluon.rnn.BidirectionalCell(gluon.rnn.LSTMCell(3, input_size=3),
                                         gluon.rnn.GRUCell(4, input_size=3))
        for i, cell in enumerate([stack, hybrid, bi]):
            cell.initialize()
            fill(cell)
            for j, valid in enumerate([None, nd.array(inputs["valid"])]):
                x = nd.array(inputs["ntc"])
                x.attach_grad()
                with autograd.record(train_mode=False):  # zoneout is random in training
                    out, states = cell.unroll(4, x, layout="NTC", merge_outputs=True,
                                              valid_length=valid)
                    total = (nd.cos(out) * out).sum() + sum((s * s).sum() for s in states)
                total.backward()
                outputs.update({"y%d_%d" % (i, j): out, "gx%d_%d" % (i, j): x.grad})
                for k, s in enumerate(states):
                    outputs["s%d_%d_%d" % (i, j, k)] = s
                grads(cell, "m%d_%d" % (i, j), outputs)
            listed, _ = cell.unroll(4, nd.array(inputs["ntc"]), layout="NTC",
                                    merge_outputs=False)
            outputs["list%d" % i] = nd.stack(*listed, axis=1)
            result["names%d" % i] = sorted(k.split("_", 1)[1] for k in cell.collect_params())
            result["info%d" % i] = [list(d["shape"]) for d in cell.state_info(2)]
        result["prefixes"] = [gluon.rnn.BidirectionalCell(gluon.rnn.RNNCell(1),
                                                          gluon.rnn.RNNCell(1)).prefix]
        try:
            bi(nd.ones((2, 3)), bi.begin_state(batch_size=2))
        except NotImplementedError:
            result["bi_step"] = "NotImplementedError"
    """,
}
CASES = {name: PRELUDE + textwrap.dedent(body) for name, body in CASES.items()}


@pytest.fixture(scope="module")
def mxnet():
    return oracle_results(CASES, INPUTS)


@pytest.mark.parametrize("name", ["cells", "step_and_list_unroll", "layers", "modifiers",
                                  "unfuse", "state_shape_error"])
def test_recurrent_numbers_and_metadata_match_mxnet(name, mxnet):
    ours, theirs = compare(CASES, name, INPUTS, mxnet, rtol=1e-4, atol=1e-5)
    assert ours == theirs


# MXNet 1.9.1 honours LSTM(use_sequence_length=True) and state clipping only in its cuDNN
# kernel (the CPU kernel ignores both), so the layer's lengths are checked against MXNet's
# cells unrolled with valid_length, which are the same recurrences with the same weights.
SEQUENCE_CELLS = PRELUDE + """
bi = gluon.rnn.BidirectionalCell(gluon.rnn.LSTMCell(5, input_size=3),
                                 gluon.rnn.LSTMCell(5, input_size=3))
bi.initialize()
fill(bi)
x = nd.array(inputs["tnc"])
states = [nd.array(inputs[k][i]) for i in range(2) for k in ("lh", "lc")]
out, new = bi.unroll(4, x, begin_state=states, layout="TNC", merge_outputs=True,
                     valid_length=nd.array(inputs["valid"]))
outputs["y"] = out
outputs["h"] = nd.stack(new[0], new[2])
outputs["c"] = nd.stack(new[1], new[3])
"""


def test_lstm_layer_with_sequence_lengths_matches_mxnets_cells_with_valid_length():
    from engine import gluon, nd

    mxnet = run_mxnet(SEQUENCE_CELLS, INPUTS)
    layer = gluon.rnn.LSTM(5, input_size=3, bidirectional=True, use_sequence_length=True)
    layer.initialize()
    for k, p in enumerate(layer.collect_params().values()):
        size = int(np.prod(p.shape))
        p.set_data(nd.array((np.sin(np.arange(size) * 0.37 + k) * 0.5).reshape(p.shape)))
    states = [nd.array(INPUTS["lh"][:2]), nd.array(INPUTS["lc"][:2])]
    out, (h, c) = layer(nd.array(INPUTS["tnc"]), states, nd.array(INPUTS["valid"]))
    for ours, key in ((out, "y"), (h, "h"), (c, "c")):
        np.testing.assert_allclose(ours.asnumpy(), mxnet[key], rtol=1e-4, atol=1e-5)


def test_lstm_state_clipping_bounds_the_cell_state():
    import engine
    from engine import gluon, nd

    layer = gluon.rnn.LSTM(5, input_size=3, state_clip_min=-0.2, state_clip_max=0.3)
    layer.initialize(engine.init.Uniform(2.0))
    x = nd.array(INPUTS["tnc"] * 5)
    _, (h, c) = layer(x, layer.begin_state(batch_size=2))
    free = gluon.rnn.LSTM(5, input_size=3, params=layer.collect_params())
    _, (_, c_free) = free(x, free.begin_state(batch_size=2))
    assert c.asnumpy().min() >= -0.2 - 1e-7 and c.asnumpy().max() <= 0.3 + 1e-7
    assert np.abs(c_free.asnumpy()).max() > 0.3  # the bound did something


def test_zoneout_in_training_keeps_some_previous_values_and_none_in_prediction():
    import engine
    from engine import autograd, gluon, nd

    engine.random.seed(3)
    base = gluon.rnn.RNNCell(50, input_size=3)
    cell = gluon.rnn.ZoneoutCell(base, zoneout_outputs=0.5)
    cell.initialize(engine.init.Uniform(1.0))
    x = nd.array(np.random.RandomState(0).randn(4, 6, 3).astype(np.float32))
    with autograd.train_mode():
        outs, _ = cell.unroll(6, x, merge_outputs=False)
    kept = [(outs[t] == outs[t - 1]).asnumpy().mean() for t in range(1, 6)]
    assert 0.2 < np.mean(kept) < 0.8  # about half the units keep the previous output
    plain, _ = cell.unroll(6, x, merge_outputs=True)
    reference, _ = gluon.rnn.RNNCell(50, input_size=3, params=base.params).unroll(
        6, x, merge_outputs=True)
    np.testing.assert_allclose(plain.asnumpy(), reference.asnumpy(), rtol=1e-6)


def test_layer_dropout_between_layers_acts_only_in_training():
    import engine
    from engine import autograd, gluon, nd

    layer = gluon.rnn.LSTM(20, num_layers=2, dropout=0.5, input_size=3)
    layer.initialize(engine.init.Uniform(1.0))
    x = nd.ones((5, 2, 3))
    predicted = [layer(x).asnumpy() for _ in range(2)]
    np.testing.assert_array_equal(predicted[0], predicted[1])
    with autograd.train_mode():
        trained = layer(x).asnumpy()
    assert not np.allclose(trained, predicted[0])
