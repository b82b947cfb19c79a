"""engine.symbol: graph construction, names, shapes, JSON, and the loss heads' gradients."""

from __future__ import annotations

import json

import numpy as np
import pytest

import engine as mx
from engine import autograd, nd
from tests.oracle import needs_mxnet, run_mxnet


def _mixed_graph():
    with mx.sym.NameManager():  # fresh per-type counters: fullyconnected0, ...
        return _build_mixed_graph()


def _build_mixed_graph():
    x = mx.sym.var("data")
    fc = mx.sym.FullyConnected(x, num_hidden=5)
    act = mx.sym.Activation(fc, act_type="relu")
    conv = mx.sym.Convolution(mx.sym.Variable("img"), kernel=(3, 3), num_filter=4)
    pool = mx.sym.Pooling(mx.sym.BatchNorm(conv), kernel=(2, 2), pool_type="max")
    return mx.sym.Group([act + 1, pool, fc * fc])


def test_auto_names_arguments_outputs_and_aux_states_follow_mxnet():
    g = _mixed_graph()
    assert g.list_arguments() == [
        "data", "fullyconnected0_weight", "fullyconnected0_bias", "img", "convolution0_weight",
        "convolution0_bias", "batchnorm0_gamma", "batchnorm0_beta"]
    assert g.list_outputs() == ["_plusscalar0_output", "pooling0_output", "_mul0_output"]
    assert g.list_auxiliary_states() == ["batchnorm0_moving_mean", "batchnorm0_moving_var"]


def test_infer_shape_fills_parameters_and_outputs():
    arg, out, aux = _mixed_graph().infer_shape(data=(2, 3), img=(1, 2, 8, 8))
    assert arg == [(2, 3), (5, 3), (5,), (1, 2, 8, 8), (4, 2, 3, 3), (4,), (4,), (4,)]
    assert out == [(2, 5), (1, 4, 5, 5), (2, 5)]
    assert aux == [(4,), (4,)]
    with pytest.warns(UserWarning, match="Cannot decide shape"):  # as MXNet warns
        assert _mixed_graph().infer_shape(data=(2, 3)) == (None, None, None)
    partial = _mixed_graph().infer_shape_partial(data=(2, 3))[0]
    assert partial[:3] == [(2, 3), (5, 3), (5,)] and partial[3] == ()  # unknown, as MXNet
    with pytest.raises(ValueError, match="not inputs"):
        _mixed_graph().infer_shape(dat=(2, 3))


def test_json_round_trip_and_save_load(tmp_path):
    g = _mixed_graph()
    text = g.tojson()
    graph = json.loads(text)
    assert graph["nodes"][3]["op"] == "FullyConnected"
    assert graph["nodes"][3]["attrs"] == {"num_hidden": "5"}
    again = mx.sym.load_json(text)
    assert again.tojson() == text
    g.save(str(tmp_path / "net-symbol.json"))
    assert mx.sym.load(str(tmp_path / "net-symbol.json")).list_outputs() == g.list_outputs()


def test_bad_graphs_give_clear_errors():
    x = mx.sym.var("data")
    with pytest.raises(ValueError, match="required argument 'num_hidden'"):
        mx.sym.FullyConnected(x)
    with pytest.raises(ValueError, match="unknown argument"):
        mx.sym.FullyConnected(x, num_hidden=3, num_hiden=4)
    with pytest.raises(TypeError, match="no input 'weights'"):
        mx.sym.FullyConnected(x, num_hidden=3, weights=x)
    graph = json.loads(mx.sym.Activation(x, act_type="relu").tojson())
    graph["nodes"][1]["op"] = "Deconvolution"
    with pytest.raises(ValueError, match="Deconvolution"):
        mx.sym.load_json(json.dumps(graph))
    with pytest.raises(ValueError, match="not a symbol JSON"):
        mx.sym.load_json("[1, 2]")
    with pytest.raises(ValueError, match="malformed"):
        mx.sym.load_json('{"nodes": [{"op": "null"}], "heads": [[0, 0, 0]]}')
    with pytest.raises(ValueError, match="no value bound for input 'data'"):
        mx.sym.Activation(x, act_type="relu").eval(other=nd.ones((1,)))


def test_arithmetic_and_concat_evaluate():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    expr = mx.sym.Concat((a + b) * 2 - 1, 1 / b, a ** 2, dim=1)
    out = expr.eval(a=nd.array([[1.0], [2.0]]), b=nd.array([[4.0], [0.5]]))[0]
    np.testing.assert_allclose(out.asnumpy(), [[9, 0.25, 1], [4, 2, 4]])
    assert expr.infer_shape(a=(2, 1), b=(2, 1))[1] == [(2, 3)]


def _softmax_grad(normalization="null", use_ignore=False, grad_scale=1.0):
    x = nd.array([[1.0, 2.0, 0.5], [0.1, 0.2, 0.3], [2.0, -1.0, 0.0]])
    x.attach_grad()
    label = nd.array([1, 2, 0])
    net = mx.sym.SoftmaxOutput(mx.sym.var("data"), mx.sym.var("label"), grad_scale=grad_scale,
                               normalization=normalization, use_ignore=use_ignore,
                               ignore_label=0)
    with autograd.record():
        (out,) = net.eval(data=x, label=label)
    out.backward(nd.ones(out.shape) * 7)  # head gradients are ignored
    return x, label, out


def test_softmax_output_gradient_is_softmax_minus_onehot():
    x, label, out = _softmax_grad(grad_scale=2.0)
    raw = x.asnumpy()
    p = np.exp(raw - raw.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(out.asnumpy(), p, rtol=1e-6)
    expected = (p - np.eye(3)[[1, 2, 0]]) * 2.0
    np.testing.assert_allclose(x.grad.asnumpy(), expected, rtol=1e-5)
    x, _, _ = _softmax_grad(normalization="batch")
    np.testing.assert_allclose(x.grad.asnumpy(), (p - np.eye(3)[[1, 2, 0]]) / 3, rtol=1e-5)
    x, _, _ = _softmax_grad(normalization="valid", use_ignore=True)  # label 0 ignored
    masked = (p - np.eye(3)[[1, 2, 0]]) * np.array([[1], [1], [0]]) / 2
    np.testing.assert_allclose(x.grad.asnumpy(), masked, rtol=1e-5, atol=1e-7)


def test_linear_regression_output_gradient_is_scaled_by_outputs_per_sample():
    x = nd.array(np.arange(12, dtype=np.float32).reshape(4, 3))
    x.attach_grad()
    net = mx.sym.LinearRegressionOutput(mx.sym.var("data"), mx.sym.var("lab"), grad_scale=2.0)
    with autograd.record():
        (out,) = net.eval(data=x, lab=nd.ones((4, 3)))
    out.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), (x.asnumpy() - 1) * 2 / 3, rtol=1e-6)


def _oracle_net(sym):
    """The graph that ``build`` below spells out for MXNet."""
    img = sym.var("img")
    c = sym.Convolution(img, kernel=(3, 3), pad=(1, 1), num_filter=4, name="conv")
    b = sym.BatchNorm(c, fix_gamma=False, name="bn")
    p = sym.Pooling(sym.Activation(b, act_type="relu"), kernel=(2, 2), stride=(2, 2),
                    pool_type="avg")
    f = sym.FullyConnected(sym.Flatten(p), num_hidden=5, name="fc")
    return sym.SoftmaxOutput(f, sym.var("label"), name="softmax", normalization="batch")


@needs_mxnet
def test_shapes_outputs_and_gradients_match_mxnet():
    rng = np.random.default_rng(0)
    inputs = {"img": rng.normal(size=(2, 2, 6, 6)).astype(np.float32),
              "label": np.array([1, 3], np.float32)}
    build = (
        "img = sym.var('img')\n"
        "c = sym.Convolution(img, kernel=(3, 3), pad=(1, 1), num_filter=4, name='conv')\n"
        "b = sym.BatchNorm(c, fix_gamma=False, name='bn')\n"
        "p = sym.Pooling(sym.Activation(b, act_type='relu'), kernel=(2, 2), stride=(2, 2),"
        " pool_type='avg')\n"
        "f = sym.FullyConnected(sym.Flatten(p), num_hidden=5, name='fc')\n"
        "net = sym.SoftmaxOutput(f, sym.var('label'), name='softmax',"
        " normalization='batch')\n"
    )
    for i, shape in enumerate([(4, 2, 3, 3), (4,), (4,), (4,), (5, 36), (5,)]):
        inputs[f"w{i}"] = rng.normal(scale=0.3, size=shape).astype(np.float32)
    code = (
        "sym = mx.sym\n" + build +
        "args = net.list_arguments()\n"
        "ex = net.simple_bind(mx.cpu(), img=(2, 2, 6, 6), label=(2,))\n"
        "names = [n for n in args if n not in ('img', 'label')]\n"
        "for i, n in enumerate(names):\n"
        "    ex.arg_dict[n][:] = nd.array(inputs['w%d' % i])\n"
        "ex.arg_dict['img'][:] = nd.array(inputs['img'])\n"
        "ex.arg_dict['label'][:] = nd.array(inputs['label'])\n"
        "ex.aux_dict['bn_moving_var'][:] = 1\n"
        "ex.forward(is_train=True)\n"
        "ex.backward()\n"
        "outputs['out'] = ex.outputs[0]\n"
        "for n in names:\n"
        "    outputs['g_' + n] = ex.grad_dict[n]\n"
        "for n in net.list_auxiliary_states():\n"
        "    outputs['aux_' + n] = ex.aux_dict[n]\n"
        "result['args'] = args\n"
        "result['json'] = net.tojson()\n"
        "result['shapes'] = [list(s) for s in net.infer_shape(img=(2, 2, 6, 6))[0]]\n"
    )
    expected = run_mxnet(code, inputs)
    net = _oracle_net(mx.sym)
    assert net.list_arguments() == expected.json["args"]
    assert [list(s) for s in net.infer_shape(img=(2, 2, 6, 6))[0]] == expected.json["shapes"]
    assert mx.sym.load_json(expected.json["json"]).list_arguments() == expected.json["args"]
    names = [n for n in net.list_arguments() if n not in ("img", "label")]
    values = {n: nd.array(inputs[f"w{i}"]) for i, n in enumerate(names)}
    for v in values.values():
        v.attach_grad()
    values["img"], values["label"] = nd.array(inputs["img"]), nd.array(inputs["label"])
    aux = {"bn_moving_mean": nd.zeros(4), "bn_moving_var": nd.ones(4)}
    with autograd.record():
        (out,) = net.eval(**values, **aux)
    out.backward()
    np.testing.assert_allclose(out.asnumpy(), expected["out"], rtol=1e-4, atol=1e-6)
    for n in names:
        np.testing.assert_allclose(values[n].grad.asnumpy(), expected["g_" + n],
                                   rtol=1e-3, atol=1e-5, err_msg=n)
    for n, arr in aux.items():
        np.testing.assert_allclose(arr.asnumpy(), expected["aux_" + n], rtol=1e-4, atol=1e-6)


def test_softmax_output_multi_output_and_probability_labels():
    x = nd.array(np.random.default_rng(0).normal(size=(2, 3, 4)).astype(np.float32))
    x.attach_grad()
    label = nd.array([[0, 1, 2, 1], [2, 2, 0, 0]])
    net = mx.sym.SoftmaxOutput(mx.sym.var("data"), mx.sym.var("label"), multi_output=True)
    assert net.infer_shape(data=(2, 3, 4))[0][1] == (2, 4)
    with autograd.record():
        (out,) = net.eval(data=x, label=label)
    out.backward()
    p = out.asnumpy()
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-6)
    onehot = np.moveaxis(np.eye(3)[label.asnumpy().astype(int)], -1, 1)
    np.testing.assert_allclose(x.grad.asnumpy(), p - onehot, rtol=1e-5, atol=1e-7)

    y = nd.array([[0.2, 0.8], [1.0, 0.0]])
    z = nd.array([[1.0, 2.0], [0.0, 0.0]])
    z.attach_grad()
    with autograd.record():
        (soft,) = mx.sym.SoftmaxOutput(mx.sym.var("data"), mx.sym.var("label")).eval(
            data=z, label=y)
    soft.backward()
    np.testing.assert_allclose(z.grad.asnumpy(), soft.asnumpy() - y.asnumpy(), rtol=1e-6)


def test_variable_shapes_feed_infer_shape():
    x = mx.sym.Variable("data", shape=(4, 6))
    net = mx.sym.FullyConnected(x, num_hidden=2, name="fc")
    arg, out, _ = net.infer_shape()
    assert arg == [(4, 6), (2, 6), (2,)] and out == [(4, 2)]
    types = net.infer_type(data=np.float32)
    assert types[0] == [np.float32] * 3 and types[1] == [np.float32]


def test_attr_keys_mxnet_reserves_are_attributes_and_others_are_arguments():
    x = mx.sym.var("x")
    fc = mx.sym.FullyConnected(x, num_hidden=2, attr={"wd_mult": "0.1"}, name="fc")
    assert fc.attr("__wd_mult__") == "0.1" and "wd_mult" not in fc.tojson().replace("__wd", "")
    with pytest.raises(mx.base.MXNetError, match="unknown argument") as refused:
        mx.sym.FullyConnected(x, num_hidden=2, attr={"foo": "1"})  # MXNet's error, and
    assert isinstance(refused.value, ValueError)  # the Python one for a bad argument
