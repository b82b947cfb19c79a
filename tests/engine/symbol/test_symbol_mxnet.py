"""engine.symbol against MXNet 1.9.1: the namespace's operators, attributes, names, layers
with learned inputs, JSON both ways and the executor (bind/simple_bind)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import engine as mx
from engine import autograd, nd
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

# (name, engine graph builder, the same graph for MXNet); inputs x (2, 3, 4), y (4, 5)
_OPS = [
    ("sum", lambda s, x, y: s.sum(x, axis=1), "sym.sum(x, axis=1)"),
    ("sum_keep", lambda s, x, y: s.sum(x, axis=(0, 2), keepdims=True),
     "sym.sum(x, axis=(0, 2), keepdims=True)"),
    ("mean", lambda s, x, y: s.mean(x, axis=-1), "sym.mean(x, axis=-1)"),
    ("max", lambda s, x, y: s.max(x, axis=2), "sym.max(x, axis=2)"),
    ("exp", lambda s, x, y: s.exp(x), "sym.exp(x)"),
    ("log_softmax", lambda s, x, y: s.log_softmax(x, axis=1), "sym.log_softmax(x, axis=1)"),
    ("softmax", lambda s, x, y: s.softmax(x), "sym.softmax(x)"),
    ("dot", lambda s, x, y: s.dot(x, y), "sym.dot(x, y)"),
    ("square_sqrt_abs", lambda s, x, y: s.sqrt(s.abs(x)) + s.square(x),
     "sym.sqrt(sym.abs(x)) + sym.square(x)"),
    ("relu_sigmoid_tanh", lambda s, x, y: s.relu(x) * s.sigmoid(x) - s.tanh(x),
     "sym.relu(x) * sym.sigmoid(x) - sym.tanh(x)"),
    ("transpose", lambda s, x, y: s.transpose(x, axes=(2, 0, 1)),
     "sym.transpose(x, axes=(2, 0, 1))"),
    ("expand_dims", lambda s, x, y: s.expand_dims(x, axis=1), "sym.expand_dims(x, axis=1)"),
    ("clip", lambda s, x, y: s.clip(x, -0.5, 0.5), "sym.clip(x, -0.5, 0.5)"),
    ("broadcast_maximum", lambda s, x, y: s.broadcast_maximum(x, s.sum(x, axis=0,
                                                                        keepdims=True)),
     "sym.broadcast_maximum(x, sym.sum(x, axis=0, keepdims=True))"),
    ("stack", lambda s, x, y: s.stack(x, x * 2, axis=1), "sym.stack(x, x * 2, axis=1)"),
    ("concat", lambda s, x, y: s.concat(x, x, dim=2), "sym.concat(x, x, dim=2)"),
    ("tile_repeat", lambda s, x, y: s.tile(s.repeat(x, repeats=2, axis=0), reps=(1, 2, 1)),
     "sym.tile(sym.repeat(x, repeats=2, axis=0), reps=(1, 2, 1))"),
    ("flatten_fluent", lambda s, x, y: x.flatten().sum(axis=1), "x.flatten().sum(axis=1)"),
    ("reshape_fluent", lambda s, x, y: x.reshape((0, -1)).exp(), "x.reshape((0, -1)).exp()"),
    ("negative_pow", lambda s, x, y: -(x ** 2) / 3 + 1, "-(x ** 2) / 3 + 1"),
    ("swapaxes", lambda s, x, y: s.swapaxes(x, dim1=0, dim2=2), "sym.swapaxes(x, dim1=0, dim2=2)"),
]


def _inputs():
    rng = np.random.default_rng(3)
    return {"x": rng.normal(size=(2, 3, 4)).astype(np.float32),
            "y": rng.normal(size=(4, 5)).astype(np.float32)}


def test_namespace_operators_match_mxnet_outputs_shapes_and_gradients():
    inputs = _inputs()
    code = ["sym = mx.sym\nx, y = sym.var('x'), sym.var('y')\nresult['shapes'] = {}\n"
            "result['outputs'] = {}\n"]
    for name, _, expr in _OPS:
        code.append(
            f"g = {expr}\n"
            f"known = {{n: inputs[n].shape for n in g.list_arguments()}}\n"
            f"result['shapes']['{name}'] = [list(s) for s in g.infer_shape(**known)[1]]\n"
            f"result['outputs']['{name}'] = g.list_outputs()\n"
            f"args = {{n: nd.array(inputs[n]) for n in g.list_arguments()}}\n"
            f"grads = {{n: nd.zeros(a.shape) for n, a in args.items()}}\n"
            f"ex = g.bind(mx.cpu(), args, args_grad=grads)\n"
            f"outputs['{name}'] = ex.forward(is_train=True)[0]\n"
            f"ex.backward(nd.ones(ex.outputs[0].shape))\n"
            f"for n, a in grads.items():\n"
            f"    outputs['{name}_grad_' + n] = a\n")
    expected = run_mxnet("".join(code), inputs)
    sym = mx.sym
    for name, build, _ in _OPS:
        x, y = sym.var("x"), sym.var("y")
        graph = build(sym, x, y)
        known = {n: inputs[n].shape for n in graph.list_arguments()}
        assert [list(s) for s in graph.infer_shape(**known)[1]] == \
            expected.json["shapes"][name], name
        assert len(graph.list_outputs()) == len(expected.json["outputs"][name]), name
        args = {n: nd.array(inputs[n]) for n in graph.list_arguments()}
        for arr in args.values():
            arr.attach_grad()
        with autograd.record():
            (out,) = graph.eval(**args)
        out.backward(nd.ones(out.shape))
        np.testing.assert_allclose(out.asnumpy(), expected[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)
        for n, arr in args.items():
            np.testing.assert_allclose(arr.grad.asnumpy(), expected[f"{name}_grad_{n}"],
                                       rtol=1e-4, atol=1e-5, err_msg=f"{name} d{n}")


def test_split_has_mxnets_outputs_and_json():
    code = ("s = mx.sym.split(mx.sym.var('x'), num_outputs=3, axis=1, name='sp')\n"
            "result['outputs'] = s.list_outputs()\n"
            "result['internals'] = s.get_internals().list_outputs()\n"
            "result['json'] = s.tojson()\n"
            "ex = s.bind(mx.cpu(), {'x': nd.array(inputs['x'])})\n"
            "for i, o in enumerate(ex.forward()):\n"
            "    outputs['o%d' % i] = o\n")
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    expected = run_mxnet(code, {"x": x})
    s = mx.sym.split(mx.sym.var("x"), num_outputs=3, axis=1, name="sp")
    assert s.list_outputs() == expected.json["outputs"]
    assert s.get_internals().list_outputs() == expected.json["internals"]
    ours, theirs = json.loads(s.tojson()), json.loads(expected.json["json"])
    assert ours["nodes"] == theirs["nodes"]
    assert ours["node_row_ptr"] == theirs["node_row_ptr"]
    loaded = mx.sym.load_json(expected.json["json"])
    for i, out in enumerate(loaded.eval(x=nd.array(x))):
        np.testing.assert_allclose(out.asnumpy(), expected[f"o{i}"])


def test_attributes_names_and_scopes_match_mxnet():
    code = (
        "sym = mx.sym\n"
        "x = sym.var('x')\n"
        "fc = sym.FullyConnected(x, num_hidden=3, name='fc', lr_mult=2)\n"
        "v = sym.var('w', lr_mult=0.5, wd_mult=0.1)\n"
        "with mx.AttrScope(ctx_group='dev1', wd_mult='0.5'):\n"
        "    z = sym.Activation(sym.var('y'), act_type='relu')\n"
        "    f2 = sym.FullyConnected(z, num_hidden=2)\n"
        "with mx.name.Prefix('p_'):\n"
        "    p = sym.FullyConnected(x, num_hidden=2, name='fc')\n"
        "    q = sym.Activation(p, act_type='relu')\n"
        "d = sym.Dropout(x, 0.3)\n"
        "pre = sym.LeakyReLU(x, act_type='prelu')\n"
        "result['fc'] = fc.attr_dict()\n"
        "result['fc_json'] = json.loads(fc.tojson())['nodes']\n"
        "result['v'] = [v.attr_dict(), v.list_attr(), v.attr('lr_mult')]\n"
        "result['scope'] = sym.Group([z, f2]).attr_dict()\n"
        "result['prefix'] = q.list_arguments() + q.list_outputs()\n"
        "result['dropout'] = json.loads(d.tojson())\n"
        "result['prelu'] = [pre.list_arguments(), pre.attr_dict()]\n"
    )
    expected = run_mxnet("import json\n" + code).json
    sym = mx.sym
    with mx.name.NameManager():
        x = sym.var("x")
        fc = sym.FullyConnected(x, num_hidden=3, name="fc", lr_mult=2)
        v = sym.var("w", lr_mult=0.5, wd_mult=0.1)
        with mx.AttrScope(ctx_group="dev1", wd_mult="0.5"):
            z = sym.Activation(sym.var("y"), act_type="relu")
            f2 = sym.FullyConnected(z, num_hidden=2)
        with mx.name.Prefix("p_"):
            p = sym.FullyConnected(x, num_hidden=2, name="fc")
            q = sym.Activation(p, act_type="relu")
        d = sym.Dropout(x, 0.3)
        pre = sym.LeakyReLU(x, act_type="prelu")
    assert fc.attr_dict() == expected["fc"]
    assert json.loads(fc.tojson())["nodes"] == expected["fc_json"]
    assert [v.attr_dict(), v.list_attr(), v.attr("lr_mult")] == expected["v"]
    assert sym.Group([z, f2]).attr_dict() == expected["scope"]
    assert q.list_arguments() + q.list_outputs() == expected["prefix"]
    ours = json.loads(d.tojson())
    assert ours["nodes"] == expected["dropout"]["nodes"]
    assert ours["node_row_ptr"] == expected["dropout"]["node_row_ptr"]
    assert [pre.list_arguments(), pre.attr_dict()] == expected["prelu"]


@pytest.mark.parametrize("act_type", ["prelu", "elu", "selu", "gelu", "leaky"])
def test_leaky_relu_variants_and_prelu_gamma_gradient_match_mxnet(act_type):
    rng = np.random.default_rng(1)
    inputs = {"x": rng.normal(size=(2, 3, 4)).astype(np.float32),
              "gamma": np.array([0.1, 0.2, 0.3], np.float32)}
    code = (
        f"g = mx.sym.LeakyReLU(mx.sym.var('x'), act_type='{act_type}', slope=0.3, name='act')\n"
        "args = {'x': nd.array(inputs['x'])}\n"
        "if 'act_gamma' in g.list_arguments():\n"
        "    args['act_gamma'] = nd.array(inputs['gamma'])\n"
        "grads = {n: nd.zeros(a.shape) for n, a in args.items()}\n"
        "ex = g.bind(mx.cpu(), args, args_grad=grads)\n"
        "outputs['out'] = ex.forward(is_train=True)[0]\n"
        "ex.backward(nd.ones(outputs['out'].shape))\n"
        "for n, a in grads.items():\n"
        "    outputs['d_' + n] = a\n"
        "result['args'] = g.list_arguments()\n"
        "result['shapes'] = [list(s) for s in g.infer_shape(x=(2, 3, 4))[0]]\n"
    )
    expected = run_mxnet(code, inputs)
    g = mx.sym.LeakyReLU(mx.sym.var("x"), act_type=act_type, slope=0.3, name="act")
    assert g.list_arguments() == expected.json["args"]
    assert [list(s) for s in g.infer_shape(x=(2, 3, 4))[0]] == expected.json["shapes"]
    args = {"x": nd.array(inputs["x"])}
    if "act_gamma" in g.list_arguments():
        args["act_gamma"] = nd.array(inputs["gamma"])
    for arr in args.values():
        arr.attach_grad()
    with autograd.record():
        (out,) = g.eval(**args)
    out.backward(nd.ones(out.shape))
    np.testing.assert_allclose(out.asnumpy(), expected["out"], rtol=1e-5, atol=1e-6)
    if act_type == "selu":
        # MXNet 1.9's selu backward is lambda * (output + alpha) for x < 0 (the output
        # already carries lambda), not the derivative; the engine keeps the true derivative
        x = inputs["x"]
        lam, alpha = 1.0507009873554805, 1.6732632423543772
        true = np.where(x > 0, lam, lam * alpha * np.exp(x))
        np.testing.assert_allclose(args["x"].grad.asnumpy(), true, rtol=1e-5)
        return
    for n, arr in args.items():
        np.testing.assert_allclose(arr.grad.asnumpy(), expected["d_" + n], rtol=1e-4,
                                   atol=1e-5, err_msg=n)


def test_normalization_and_embedding_layers_match_mxnet():
    rng = np.random.default_rng(2)
    inputs = {"x": rng.normal(size=(2, 4, 3, 3)).astype(np.float32),
              "g": rng.normal(size=(4,)).astype(np.float32),
              "b": rng.normal(size=(4,)).astype(np.float32),
              "g2": rng.normal(size=(2,)).astype(np.float32),
              "b2": rng.normal(size=(2,)).astype(np.float32),
              "ids": np.array([[0, 2], [4, 1]], np.float32),
              "w": rng.normal(size=(5, 3)).astype(np.float32)}
    code = (
        "sym = mx.sym\n"
        "x, g, b = sym.var('x'), sym.var('g'), sym.var('b')\n"
        "nets = {'inorm': sym.InstanceNorm(x, g, b, eps=1e-3),\n"
        "        'gnorm': sym.GroupNorm(x, sym.var('g2'), sym.var('b2'), num_groups=2),\n"
        "        'lnorm': sym.LayerNorm(x, sym.var('g3'), sym.var('b3'), axis=2)}\n"
        "vals = {'x': nd.array(inputs['x']), 'g': nd.array(inputs['g']),\n"
        "        'b': nd.array(inputs['b']), 'g3': nd.array(inputs['g'][:3]),\n"
        "        'g2': nd.array(inputs['g2']), 'b2': nd.array(inputs['b2']),\n"
        "        'b3': nd.array(inputs['b'][:3])}\n"
        "for k, net in nets.items():\n"
        "    args = {n: vals[n] for n in net.list_arguments()}\n"
        "    grads = {n: nd.zeros(a.shape) for n, a in args.items()}\n"
        "    ex = net.bind(mx.cpu(), args, args_grad=grads)\n"
        "    outputs[k] = ex.forward(is_train=True)[0]\n"
        "    ex.backward(nd.array(np.arange(outputs[k].size).reshape(outputs[k].shape) % 5))\n"
        "    for n, a in grads.items():\n"
        "        outputs[k + '_d' + n] = a\n"
        "e = sym.Embedding(sym.var('ids'), input_dim=5, output_dim=3, name='emb')\n"
        "result['emb'] = [e.list_arguments(), [list(s) for s in\n"
        "                 e.infer_shape(ids=(2, 2))[0]]]\n"
        "outputs['emb'] = e.eval(ids=nd.array(inputs['ids']),\n"
        "                        emb_weight=nd.array(inputs['w']))[0]\n"
        "gn = sym.GroupNorm(x, num_groups=2, name='gn')\n"
        "result['gn'] = [gn.list_arguments(),\n"
        "                [list(s) for s in gn.infer_shape(x=(2, 4, 3, 3))[0]]]\n"
    )
    expected = run_mxnet(code, inputs)
    sym = mx.sym
    x, g, b = sym.var("x"), sym.var("g"), sym.var("b")
    nets = {"inorm": sym.InstanceNorm(x, g, b, eps=1e-3),
            "gnorm": sym.GroupNorm(x, sym.var("g2"), sym.var("b2"), num_groups=2),
            "lnorm": sym.LayerNorm(x, sym.var("g3"), sym.var("b3"), axis=2)}
    vals = {"x": inputs["x"], "g": inputs["g"], "b": inputs["b"], "g3": inputs["g"][:3],
            "b3": inputs["b"][:3], "g2": inputs["g2"], "b2": inputs["b2"]}
    for key, net in nets.items():
        args = {n: nd.array(vals[n]) for n in net.list_arguments()}
        for arr in args.values():
            arr.attach_grad()
        with autograd.record():
            (out,) = net.eval(**args)
        out.backward(nd.array(np.arange(out.size).reshape(out.shape) % 5))
        np.testing.assert_allclose(out.asnumpy(), expected[key], rtol=1e-4, atol=1e-5,
                                   err_msg=key)
        for n, arr in args.items():
            np.testing.assert_allclose(arr.grad.asnumpy(), expected[f"{key}_d{n}"], rtol=1e-3,
                                       atol=1e-4, err_msg=f"{key} d{n}")
    e = sym.Embedding(sym.var("ids"), input_dim=5, output_dim=3, name="emb")
    assert [e.list_arguments(), [list(s) for s in e.infer_shape(ids=(2, 2))[0]]] == \
        expected.json["emb"]
    out = e.eval(ids=nd.array(inputs["ids"]), emb_weight=nd.array(inputs["w"]))[0]
    np.testing.assert_allclose(out.asnumpy(), expected["emb"])
    gn = sym.GroupNorm(x, num_groups=2, name="gn")
    assert [gn.list_arguments(), [list(s) for s in gn.infer_shape(x=(2, 4, 3, 3))[0]]] == \
        expected.json["gn"]


def test_json_written_by_mxnet_loads_and_ours_loads_in_mxnet():
    rng = np.random.default_rng(4)
    inputs = {"x": rng.normal(size=(3, 4)).astype(np.float32),
              "w": rng.normal(size=(2, 4)).astype(np.float32)}
    build = ("sym = mx.sym\nx = sym.var('x')\n"
             "h = sym.FullyConnected(x, num_hidden=2, no_bias=True, name='fc')\n"
             "net = sym.log_softmax(sym.broadcast_add(sym.exp(h) * 2, sym.sum(x, axis=1, "
             "keepdims=True)), axis=1)\n")
    expected = run_mxnet(build + "result['json'] = net.tojson()\n"
                         "outputs['out'] = net.eval(x=nd.array(inputs['x']),\n"
                         "                          fc_weight=nd.array(inputs['w']))[0]\n",
                         inputs)
    theirs = mx.sym.load_json(expected.json["json"])
    out = theirs.eval(x=nd.array(inputs["x"]), fc_weight=nd.array(inputs["w"]))[0]
    np.testing.assert_allclose(out.asnumpy(), expected["out"], rtol=1e-5, atol=1e-5)
    with mx.name.NameManager():
        x = mx.sym.var("x")
        h = mx.sym.FullyConnected(x, num_hidden=2, no_bias=True, name="fc")
        net = mx.sym.log_softmax(mx.sym.broadcast_add(mx.sym.exp(h) * 2,
                                                      mx.sym.sum(x, axis=1, keepdims=True)),
                                 axis=1)
    assert json.loads(net.tojson())["nodes"] == json.loads(expected.json["json"])["nodes"]
    back = run_mxnet("net = mx.sym.load_json(inputs_json)\n"
                     "outputs['out'] = net.eval(x=nd.array(inputs['x']),\n"
                     "                          fc_weight=nd.array(inputs['w']))[0]\n"
                     .replace("inputs_json", repr(net.tojson())), inputs)
    np.testing.assert_allclose(back["out"], expected["out"], rtol=1e-6)


def test_infer_type_and_simple_bind_match_mxnet():
    code = ("x = mx.sym.var('x')\n"
            "net = mx.sym.FullyConnected(x, num_hidden=3, name='fc')\n"
            "result['fc'] = [[np.dtype(t).name for t in ts] for ts in "
            "net.infer_type(x='float16')]\n"
            "ex = net.simple_bind(mx.cpu(), x=(2, 4))\n"
            "result['bind'] = sorted((k, list(v.shape)) for k, v in ex.arg_dict.items())\n"
            "result['grads'] = sorted(k for k, v in ex.grad_dict.items() if v is not None)\n")
    expected = run_mxnet(code).json
    x = mx.sym.var("x")
    net = mx.sym.FullyConnected(x, num_hidden=3, name="fc")
    assert [[np.dtype(t).name for t in ts] for ts in net.infer_type(x="float16")] == \
        expected["fc"]
    ex = net.simple_bind(mx.cpu(), x=(2, 4))
    assert sorted([k, list(v.shape)] for k, v in ex.arg_dict.items()) == expected["bind"]
    assert sorted(k for k, v in ex.grad_dict.items() if v is not None) == expected["grads"]


_LAYOUT_GRAPHS = [
    ("conv_nhwc", "Convolution", {"kernel": (3, 3), "num_filter": 5, "layout": "NHWC"},
     (2, 8, 8, 4)),
    ("conv_ncdhw", "Convolution", {"kernel": (3, 1, 2), "num_filter": 2, "stride": (2, 1, 1),
                                   "pad": (1, 0, 0), "num_group": 2}, (1, 4, 5, 3, 4)),
    ("conv1d", "Convolution", {"kernel": (3,), "num_filter": 6, "dilate": (2,)}, (2, 3, 9)),
    ("pool_nhwc", "Pooling", {"kernel": (2, 2), "stride": (2, 2), "layout": "NHWC"},
     (2, 8, 8, 4)),
    ("pool_full", "Pooling", {"kernel": (3, 3), "stride": (2, 2), "pooling_convention": "full",
                              "pool_type": "avg"}, (1, 2, 8, 8)),
    ("pool_global", "Pooling", {"global_pool": True, "kernel": (1,)}, (2, 3, 7)),
    ("deconv", "Deconvolution", {"kernel": (3, 3), "num_filter": 5, "stride": (2, 2),
                                 "adj": (1, 1), "pad": (1, 1), "no_bias": False}, (2, 4, 8, 8)),
    ("deconv_nhwc", "Deconvolution", {"kernel": (3, 3), "num_filter": 5, "layout": "NHWC"},
     (2, 8, 8, 4)),
    ("deconv_target", "Deconvolution", {"kernel": (4, 4), "num_filter": 2, "stride": (2, 2),
                                        "target_shape": (9, 9)}, (1, 3, 4, 4)),
]


def test_convolution_pooling_and_deconvolution_shapes_follow_mxnet_in_every_layout():
    code = ("result['shapes'] = {}\n"
            f"for case, op, params, shape in {_LAYOUT_GRAPHS!r}:\n"
            "    g = getattr(mx.sym, op)(mx.sym.var('x'), name='op', **params)\n"
            "    arg, out, _ = g.infer_shape(x=shape)\n"
            "    result['shapes'][case] = [g.list_arguments(), [list(s) for s in arg],\n"
            "                              [list(s) for s in out]]\n")
    expected = run_mxnet(code).json["shapes"]
    for case, op, params, shape in _LAYOUT_GRAPHS:
        g = getattr(mx.sym, op)(mx.sym.var("x"), name="op", **params)
        arg, out, _ = g.infer_shape(x=shape)
        assert [g.list_arguments(), [list(s) for s in arg], [list(s) for s in out]] == \
            expected[case], case


def test_partial_shape_and_type_inference_answer_as_mxnet():
    code = ("x, y = mx.sym.var('x'), mx.sym.var('y')\n"
            "g = mx.sym.FullyConnected(x, num_hidden=3, name='fc') + y\n"
            "w = mx.sym.var('w', shape=(3, 0))\n"
            "h = mx.sym.FullyConnected(x, weight=w, num_hidden=3, no_bias=True)\n"
            "t = mx.sym.var('t', dtype='float16') * 2\n"
            "def names(ts):\n"
            "    return None if ts is None else [None if v is None else np.dtype(v).name\n"
            "                                    for v in ts]\n"
            "result['cases'] = [\n"
            "    [[list(s) for s in part] for part in g.infer_shape_partial()],\n"
            "    [[list(s) for s in part] for part in g.infer_shape_partial(y=(2, 3))],\n"
            "    [[list(s) for s in part] for part in h.infer_shape_partial()],\n"
            "    [[list(s) for s in part] for part in h.infer_shape(x=(2, 5))],\n"
            "    [names(part) for part in g.infer_type()],\n"
            "    [names(part) for part in g.infer_type_partial()],\n"
            "    [names(part) for part in t.infer_type()],\n"
            "    json.loads(t.tojson())['nodes'][0]]\n")
    expected = run_mxnet("import json\n" + code).json["cases"]
    x, y = mx.sym.var("x"), mx.sym.var("y")
    g = mx.sym.FullyConnected(x, num_hidden=3, name="fc") + y
    w = mx.sym.var("w", shape=(3, 0))
    h = mx.sym.FullyConnected(x, weight=w, num_hidden=3, no_bias=True)
    t = mx.sym.var("t", dtype="float16") * 2

    def names(types):
        return None if types is None else [None if v is None else np.dtype(v).name
                                           for v in types]

    with pytest.warns(UserWarning, match="Cannot decide type"):  # as MXNet warns
        untyped = [names(part) for part in g.infer_type()]
    ours = [
        [[list(s) for s in part] for part in g.infer_shape_partial()],
        [[list(s) for s in part] for part in g.infer_shape_partial(y=(2, 3))],
        [[list(s) for s in part] for part in h.infer_shape_partial()],
        [[list(s) for s in part] for part in h.infer_shape(x=(2, 5))],
        untyped,
        [names(part) for part in g.infer_type_partial()],
        [names(part) for part in t.infer_type()],
        json.loads(t.tojson())["nodes"][0]]  # __dtype__ as MXNet's type flag
    assert ours == expected


_SOFTMAX_LABEL_CASES = [((2, 3, 4), {}), ((2, 3, 4, 5), {"multi_output": True}),
                        ((2, 3, 4), {"multi_output": True}),
                        ((2, 3, 4, 5), {"preserve_shape": True}), ((4, 3), {})]


def test_softmax_output_infers_mxnet_label_shapes():
    code = ("result['shapes'] = []\n"
            f"for shape, params in {_SOFTMAX_LABEL_CASES!r}:\n"
            "    g = mx.sym.SoftmaxOutput(mx.sym.var('d'), mx.sym.var('l'), **params)\n"
            "    result['shapes'].append([list(s) for s in g.infer_shape(d=shape)[0]])\n")
    expected = run_mxnet(code).json["shapes"]
    for (shape, params), want in zip(_SOFTMAX_LABEL_CASES, expected, strict=True):
        g = mx.sym.SoftmaxOutput(mx.sym.var("d"), mx.sym.var("l"), **params)
        assert [list(s) for s in g.infer_shape(d=shape)[0]] == want, (shape, params)
