"""engine.symbol's loss heads and fused layers against MXNet 1.9.1: SVMOutput, the fused
RNN operator and CTCLoss (outputs, JSON and gradients)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import engine as mx
from engine import autograd, nd
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet


@pytest.mark.parametrize("use_linear", [False, True])
def test_svm_output_gradient_matches_mxnet(use_linear):
    rng = np.random.default_rng(6)
    inputs = {"x": rng.normal(scale=1.5, size=(5, 4)).astype(np.float32),
              "y": np.array([0, 3, 1, 1, 2], np.float32)}
    code = (f"g = mx.sym.SVMOutput(mx.sym.var('x'), mx.sym.var('y'), margin=0.8,\n"
            f"                     regularization_coefficient=0.5, use_linear={use_linear})\n"
            "grads = {'x': nd.zeros((5, 4))}\n"
            "ex = g.bind(mx.cpu(), {'x': nd.array(inputs['x']), 'y': nd.array(inputs['y'])},\n"
            "            args_grad=grads, grad_req={'x': 'write', 'y': 'null'})\n"
            "outputs['out'] = ex.forward(is_train=True)[0]\n"
            "ex.backward()\n"
            "outputs['dx'] = grads['x']\n"
            "result['args'] = g.list_arguments()\n")
    expected = run_mxnet(code, inputs)
    g = mx.sym.SVMOutput(mx.sym.var("x"), mx.sym.var("y"), margin=0.8,
                         regularization_coefficient=0.5, use_linear=use_linear)
    assert g.list_arguments() == expected.json["args"]
    x = nd.array(inputs["x"])
    x.attach_grad()
    with autograd.record():
        (out,) = g.eval(x=x, y=nd.array(inputs["y"]))
    out.backward()
    np.testing.assert_allclose(out.asnumpy(), expected["out"])
    np.testing.assert_allclose(x.grad.asnumpy(), expected["dx"], rtol=1e-5, atol=1e-6)


_RNN_CASES = [
    ("lstm_bi2", {"mode": "lstm", "num_layers": 2, "bidirectional": True,
                  "state_outputs": True}),
    ("gru", {"mode": "gru", "num_layers": 1}),
    ("gru_states", {"mode": "gru", "num_layers": 2, "state_outputs": True}),
    ("rnn_tanh_bi", {"mode": "rnn_tanh", "num_layers": 1, "bidirectional": True}),
    ("rnn_relu", {"mode": "rnn_relu", "num_layers": 2, "state_outputs": True}),
]


def test_lstm_state_clip_bounds_the_cell_state():
    # MXNet 1.9 applies lstm_state_clip_* only in its cuDNN kernel (its CPU kernel ignores
    # them); the engine applies the documented clip on every device
    g = mx.sym.RNN(mx.sym.var("x"), state_size=4, num_layers=1, mode="lstm", name="rnn",
                   state_outputs=True, lstm_state_clip_min=-0.2, lstm_state_clip_max=0.3)
    shapes = dict(zip(g.list_arguments(), g.infer_shape(x=(6, 2, 3))[0], strict=True))
    rng = np.random.default_rng(14)
    args = {n: nd.array(rng.normal(scale=2.0, size=s).astype(np.float32))
            for n, s in shapes.items()}
    _, _, cell = g.eval(**args)
    assert cell.asnumpy().min() >= -0.2 - 1e-7 and cell.asnumpy().max() <= 0.3 + 1e-7
    unclipped = mx.sym.RNN(mx.sym.var("x"), state_size=4, num_layers=1, mode="lstm",
                           name="rnn", state_outputs=True).eval(**args)[2].asnumpy()
    assert unclipped.max() > 0.3 or unclipped.min() < -0.2


def test_fused_rnn_matches_mxnet_outputs_states_and_gradients():
    rng = np.random.default_rng(13)
    inputs = {"x": rng.normal(size=(5, 2, 3)).astype(np.float32)}
    for case, params in _RNN_CASES:
        g = mx.sym.RNN(mx.sym.var("x"), state_size=4, name="rnn", **params)
        arg_shapes, _, _ = g.infer_shape(x=(5, 2, 3))
        for name, shape in zip(g.list_arguments()[1:], arg_shapes[1:], strict=True):
            inputs[f"{case}_{name}"] = rng.normal(scale=0.5, size=shape).astype(np.float32)
    code = (
        "import json\n"
        "result['meta'] = {}\n"
        f"for case, params in {_RNN_CASES!r}:\n"
        "    g = mx.sym.RNN(mx.sym.var('x'), state_size=4, name='rnn', **params)\n"
        "    args = {'x': nd.array(inputs['x'])}\n"
        "    for n in g.list_arguments()[1:]:\n"
        "        args[n] = nd.array(inputs[case + '_' + n])\n"
        "    grads = {n: nd.zeros(a.shape) for n, a in args.items()}\n"
        "    ex = g.bind(mx.cpu(), args, args_grad=grads)\n"
        "    outs = ex.forward(is_train=True)\n"
        "    ex.backward([nd.ones(o.shape) for o in outs])\n"
        "    for i, o in enumerate(outs):\n"
        "        outputs[case + '_out%d' % i] = o\n"
        "    for n, a in grads.items():\n"
        "        outputs[case + '_d' + n] = a\n"
        "    graph = json.loads(g.tojson())\n"
        "    result['meta'][case] = [g.list_arguments(), g.list_outputs(),\n"
        "                            [list(s) for s in g.infer_shape(x=(5, 2, 3))[1]],\n"
        "                            graph['nodes'], graph['node_row_ptr']]\n"
    )
    expected = run_mxnet(code, inputs)
    for case, params in _RNN_CASES:
        g = mx.sym.RNN(mx.sym.var("x"), state_size=4, name="rnn", **params)
        graph = json.loads(g.tojson())
        assert [g.list_arguments(), g.list_outputs(),
                [list(s) for s in g.infer_shape(x=(5, 2, 3))[1]],
                graph["nodes"], graph["node_row_ptr"]] == expected.json["meta"][case], case
        args = {"x": nd.array(inputs["x"])}
        for n in g.list_arguments()[1:]:
            args[n] = nd.array(inputs[f"{case}_{n}"])
        for arr in args.values():
            arr.attach_grad()
        with autograd.record():
            outs = g.eval(**args)
        autograd.backward(outs, [nd.ones(o.shape) for o in outs])
        for i, out in enumerate(outs):
            np.testing.assert_allclose(out.asnumpy(), expected[f"{case}_out{i}"], rtol=1e-4,
                                       atol=1e-5, err_msg=f"{case} output {i}")
        for n, arr in args.items():
            np.testing.assert_allclose(arr.grad.asnumpy(), expected[f"{case}_d{n}"],
                                       rtol=1e-3, atol=1e-4, err_msg=f"{case} d{n}")


_CTC_CASES = [
    ("first", "sym.CTCLoss(d, l, name='ctc')"),
    ("last_lengths", "sym.ctc_loss(d, l, dl, ll, use_data_lengths=True,"
                     " use_label_lengths=True, blank_label='last')"),
]


def _ctc_graph(sym, case):
    d, l, dl, ll = sym.var("d"), sym.var("l"), sym.var("dl"), sym.var("ll")
    if case == "first":
        return sym.CTCLoss(d, l, name="ctc")
    return sym.ctc_loss(d, l, dl, ll, use_data_lengths=True, use_label_lengths=True,
                        blank_label="last")


def test_ctc_loss_matches_mxnet_loss_and_gradient():
    import inspect

    rng = np.random.default_rng(15)
    inputs = {"d": rng.normal(size=(7, 3, 5)).astype(np.float32),
              "l_first": np.array([[1, 2, 2], [3, 0, 0], [4, 1, 0]], np.float32),
              "l_last_lengths": np.array([[0, 1, 1], [2, 3, -1], [3, 0, 2]], np.float32),
              "dl": np.array([7, 5, 6], np.float32), "ll": np.array([3, 2, 2], np.float32),
              "head": np.array([1.0, 0.5, 2.0], np.float32)}
    code = (inspect.getsource(_ctc_graph) + "import json\nresult['meta'] = {}\n"
            "for case in ('first', 'last_lengths'):\n"
            "    with mx.name.NameManager():\n"
            "        g = _ctc_graph(mx.sym, case)\n"
            "    args = {n: nd.array(inputs['l_' + case] if n == 'l' else inputs[n])\n"
            "            for n in g.list_arguments()}\n"
            "    grads = {'d': nd.zeros((7, 3, 5))}\n"
            "    reqs = {n: 'write' if n == 'd' else 'null' for n in args}\n"
            "    ex = g.bind(mx.cpu(), args, args_grad=grads, grad_req=reqs)\n"
            "    outputs[case] = ex.forward(is_train=True)[0]\n"
            "    ex.backward(nd.array(inputs['head']))\n"
            "    outputs[case + '_dd'] = grads['d']\n"
            "    result['meta'][case] = [g.list_arguments(), g.list_outputs(),\n"
            "                            json.loads(g.tojson())['nodes'][-1],\n"
            "                            json.loads(g.tojson())['node_row_ptr']]\n")
    expected = run_mxnet(code, inputs)
    for case in ("first", "last_lengths"):
        with mx.name.NameManager():
            g = _ctc_graph(mx.sym, case)
        graph = json.loads(g.tojson())
        assert [g.list_arguments(), g.list_outputs(), graph["nodes"][-1],
                graph["node_row_ptr"]] == expected.json["meta"][case]
        args = {n: nd.array(inputs["l_" + case] if n == "l" else inputs[n])
                for n in g.list_arguments()}
        args["d"].attach_grad()
        with autograd.record():
            (out,) = g.eval(**args)
        out.backward(nd.array(inputs["head"]))
        np.testing.assert_allclose(out.asnumpy(), expected[case], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(args["d"].grad.asnumpy(), expected[case + "_dd"],
                                   rtol=1e-3, atol=1e-5)


_DECONV_CASES = [
    ("strided", {"kernel": (3, 3), "num_filter": 4, "stride": (2, 2), "adj": (1, 1),
                 "pad": (1, 1), "no_bias": False}),
    ("grouped_target", {"kernel": (2, 2), "num_filter": 4, "stride": (2, 2), "num_group": 2,
                        "target_shape": (6, 6)}),
]


def test_deconvolution_matches_mxnet_outputs_and_gradients():
    # the symbol node evaluates through nd.Deconvolution (it once looked the function up in
    # the wrong module and could only infer shapes)
    rng = np.random.default_rng(16)
    inputs = {"x": rng.normal(size=(2, 4, 3, 3)).astype(np.float32)}
    for case, params in _DECONV_CASES:
        g = mx.sym.Deconvolution(mx.sym.var("x"), name="dc", **params)
        for name, shape in zip(g.list_arguments()[1:], g.infer_shape(x=(2, 4, 3, 3))[0][1:],
                               strict=True):
            inputs[f"{case}_{name}"] = rng.normal(scale=0.5, size=shape).astype(np.float32)
    code = (
        f"for case, params in {_DECONV_CASES!r}:\n"
        "    g = mx.sym.Deconvolution(mx.sym.var('x'), name='dc', **params)\n"
        "    args = {'x': nd.array(inputs['x'])}\n"
        "    for n in g.list_arguments()[1:]:\n"
        "        args[n] = nd.array(inputs[case + '_' + n])\n"
        "    grads = {n: nd.zeros(a.shape) for n, a in args.items()}\n"
        "    ex = g.bind(mx.cpu(), args, args_grad=grads)\n"
        "    out = ex.forward(is_train=True)[0]\n"
        "    ex.backward(out * 0 + 1)\n"
        "    outputs[case + '_out'] = out\n"
        "    for n, a in grads.items():\n"
        "        outputs[case + '_d' + n] = a\n"
    )
    expected = run_mxnet(code, inputs)
    for case, params in _DECONV_CASES:
        g = mx.sym.Deconvolution(mx.sym.var("x"), name="dc", **params)
        args = {"x": nd.array(inputs["x"])}
        for n in g.list_arguments()[1:]:
            args[n] = nd.array(inputs[f"{case}_{n}"])
        for arr in args.values():
            arr.attach_grad()
        with autograd.record():
            (out,) = g.eval(**args)
        out.backward(nd.ones(out.shape))
        np.testing.assert_allclose(out.asnumpy(), expected[f"{case}_out"], rtol=1e-4,
                                   atol=1e-5, err_msg=case)
        for n, arr in args.items():
            np.testing.assert_allclose(arr.grad.asnumpy(), expected[f"{case}_d{n}"],
                                       rtol=1e-4, atol=1e-4, err_msg=f"{case} d{n}")
