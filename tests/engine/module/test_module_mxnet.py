"""engine.module against MXNet 1.9.1: forward's default mode, the errors of bind and
set_params, lr_mult/wd_mult attributes in the optimizer, BucketingModule, reshape and the
Monitor."""

from __future__ import annotations

import numpy as np
import pytest

import engine as mx
from engine import nd
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

_BN_NET = """
def build(sym):
    data = sym.var('data')
    fc = sym.FullyConnected(data, num_hidden=4, name='fc')
    bn = sym.BatchNorm(fc, fix_gamma=False, name='bn')
    return sym.LinearRegressionOutput(bn, name='lro')
"""


def _build_bn(sym):
    data = sym.var("data")
    fc = sym.FullyConnected(data, num_hidden=4, name="fc")
    bn = sym.BatchNorm(fc, fix_gamma=False, name="bn")
    return sym.LinearRegressionOutput(bn, name="lro")


def _bn_inputs():
    rng = np.random.default_rng(0)
    return {"x": rng.normal(size=(6, 3)).astype(np.float32),
            "y": rng.normal(size=(6, 4)).astype(np.float32),
            "w": rng.normal(size=(4, 3)).astype(np.float32)}


def _bn_module(mx_, for_training):
    mod = mx_.mod.Module(_build_bn(mx_.sym), label_names=["lro_label"])
    mod.bind(data_shapes=[("data", (6, 3))], label_shapes=[("lro_label", (6, 4))],
             for_training=for_training)
    mod.init_params(mx_.init.Zero())
    arg, aux = mod.get_params()
    arg["fc_weight"] = mx_.nd.array(_bn_inputs()["w"])
    arg["bn_gamma"] = mx_.nd.ones((4,))
    aux["bn_moving_var"] = mx_.nd.ones((4,)) * 2
    mod.set_params(arg, aux)
    return mod


def test_forward_without_is_train_follows_the_bind_for_training():
    inputs = _bn_inputs()
    code = _BN_NET + (
        "def module(for_training):\n"
        "    mod = mx.mod.Module(build(mx.sym), label_names=['lro_label'])\n"
        "    mod.bind(data_shapes=[('data', (6, 3))], label_shapes=[('lro_label', (6, 4))],\n"
        "             for_training=for_training)\n"
        "    mod.init_params(mx.init.Zero())\n"
        "    arg, aux = mod.get_params()\n"
        "    arg['fc_weight'] = nd.array(inputs['w'])\n"
        "    arg['bn_gamma'] = nd.ones((4,))\n"
        "    aux['bn_moving_var'] = nd.ones((4,)) * 2\n"
        "    mod.set_params(arg, aux)\n"
        "    return mod\n"
        "batch = mx.io.DataBatch([nd.array(inputs['x'])], [nd.array(inputs['y'])])\n"
        "mod = module(True)\n"
        "mod.forward(batch)\n"
        "outputs['train'] = mod.get_outputs()[0]\n"
        "mod.backward()\n"
        "outputs['grad'] = mod._exec_group.grad_arrays[0][0]\n"
        "mod = module(False)\n"
        "mod.forward(batch)\n"
        "outputs['infer'] = mod.get_outputs()[0]\n"
    )
    expected = run_mxnet(code, inputs)
    batch = mx.io.DataBatch([nd.array(inputs["x"])], [nd.array(inputs["y"])])
    mod = _bn_module(mx, True)
    mod.forward(batch)
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), expected["train"], rtol=1e-4,
                               atol=1e-5)
    mod.backward()
    grad = mod._exec_group.params[0]["fc_weight"].grad.asnumpy()
    np.testing.assert_allclose(grad, expected["grad"], rtol=1e-3, atol=1e-5)
    mod = _bn_module(mx, False)
    mod.forward(batch)
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), expected["infer"], rtol=1e-4,
                               atol=1e-5)


_SET_PARAMS_CASES = [
    ({"fc_weight", "extra"}, {}),
    ({"fc_weight", "fc_bias", "extra"}, {}),
    ({"fc_weight"}, {}),
    ({"fc_weight", "extra"}, {"allow_missing": True}),
    ({"fc_weight", "fc_bias", "extra"}, {"allow_extra": True}),
    ({"fc_weight", "extra"}, {"allow_missing": True, "allow_extra": True}),
    ({"fc_weight"}, {"allow_missing": True}),
]


def _set_params_outcomes(mx_):
    outcomes = []
    for names, flags in _SET_PARAMS_CASES:
        net = mx_.sym.FullyConnected(mx_.sym.var("data"), num_hidden=2, name="fc")
        mod = mx_.mod.Module(net, label_names=None)
        mod.bind(data_shapes=[("data", (3, 4))])
        mod.init_params(mx_.init.Zero())
        values = {"fc_weight": mx_.nd.ones((2, 4)), "fc_bias": mx_.nd.ones((2,)) * 3,
                  "extra": mx_.nd.ones((1,))}
        try:
            mod.set_params({n: values[n] for n in sorted(names)}, {}, **flags)
        except Exception as exc:  # noqa: BLE001 - the exception type is the result
            outcomes.append(type(exc).__name__)
            continue
        arg = mod.get_params()[0]
        outcomes.append([arg["fc_weight"].asnumpy().tolist(), arg["fc_bias"].asnumpy().tolist()])
    return outcomes


def test_bind_and_set_params_fail_as_mxnet_does():
    import inspect

    code = ("_SET_PARAMS_CASES = " + repr(_SET_PARAMS_CASES) + "\n"
            + inspect.getsource(_set_params_outcomes)
            + "result['set'] = _set_params_outcomes(mx)\n"
            "mod = mx.mod.Module(mx.sym.FullyConnected(mx.sym.var('data'), num_hidden=2),\n"
            "                    label_names=None)\n"
            "try:\n"
            "    mod.bind(data_shapes=[('data', nd.array([3, 4]))])\n"
            "    result['bind'] = 'ok'\n"
            "except Exception as exc:\n"
            "    result['bind'] = type(exc).__name__\n")
    expected = run_mxnet(code).json
    assert _set_params_outcomes(mx) == expected["set"]
    mod = mx.mod.Module(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=2),
                        label_names=None)
    with pytest.raises(TypeError):
        mod.bind(data_shapes=[("data", nd.array([3, 4]))])
    assert expected["bind"] == "TypeError"


_MULT_NET = """
def build(sym):
    data = sym.var('data')
    w1 = sym.var('fc1_weight', lr_mult=0.0)
    h = sym.FullyConnected(data, weight=w1, num_hidden=4, name='fc1')
    h = sym.Activation(h, act_type='tanh')
    with mx.AttrScope(wd_mult='3'):
        h2 = sym.FullyConnected(h, num_hidden=4, name='fc2', lr_mult=2)
    out = sym.FullyConnected(h2, num_hidden=2, name='fc3', attr={'__wd_mult__': '0'})
    return sym.LinearRegressionOutput(out, name='lro')
"""


def _train_steps(mx_, build, inputs, steps=3):
    mod = mx_.mod.Module(build(mx_.sym), label_names=["lro_label"])
    mod.bind(data_shapes=[("data", (5, 3))], label_shapes=[("lro_label", (5, 2))])
    arg = {k[2:]: mx_.nd.array(v) for k, v in inputs.items() if k.startswith("p_")}
    mod.init_params(arg_params=arg, allow_missing=False)
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1, "wd": 0.05,
                                                          "momentum": 0.9})
    batch = mx_.io.DataBatch([mx_.nd.array(inputs["x"])], [mx_.nd.array(inputs["y"])])
    for _ in range(steps):
        mod.forward_backward(batch)
        mod.update()
    return {k: v.asnumpy() for k, v in mod.get_params()[0].items()}


def test_lr_mult_and_wd_mult_attributes_reach_the_optimizer_as_in_mxnet():
    import inspect

    rng = np.random.default_rng(5)
    inputs = {"x": rng.normal(size=(5, 3)).astype(np.float32),
              "y": rng.normal(size=(5, 2)).astype(np.float32)}
    for name, shape in (("fc1_weight", (4, 3)), ("fc1_bias", (4,)), ("fc2_weight", (4, 4)),
                        ("fc2_bias", (4,)), ("fc3_weight", (2, 4)), ("fc3_bias", (2,))):
        inputs["p_" + name] = rng.normal(size=shape).astype(np.float32)
    code = (_MULT_NET + inspect.getsource(_train_steps)
            + "for k, v in _train_steps(mx, build, inputs).items():\n"
              "    outputs[k] = v\n")
    expected = run_mxnet(code, inputs)

    def build(sym):
        data = sym.var("data")
        w1 = sym.var("fc1_weight", lr_mult=0.0)
        h = sym.FullyConnected(data, weight=w1, num_hidden=4, name="fc1")
        h = sym.Activation(h, act_type="tanh")
        with mx.AttrScope(wd_mult="3"):
            h2 = sym.FullyConnected(h, num_hidden=4, name="fc2", lr_mult=2)
        out = sym.FullyConnected(h2, num_hidden=2, name="fc3", attr={"__wd_mult__": "0"})
        return sym.LinearRegressionOutput(out, name="lro")

    ours = _train_steps(mx, build, inputs)
    np.testing.assert_array_equal(ours["fc1_weight"], inputs["p_fc1_weight"])  # lr_mult 0
    for name, value in ours.items():
        np.testing.assert_allclose(value, expected[name], rtol=1e-4, atol=1e-6, err_msg=name)


def _bucketing_run(mx_, inputs):
    def sym_gen(length):
        data = mx_.sym.var("data")
        pooled = mx_.sym.sum(data, axis=1) / length
        fc = mx_.sym.FullyConnected(pooled, num_hidden=2, name="fc")
        return mx_.sym.LinearRegressionOutput(fc, name="lro"), ("data",), ("lro_label",)

    mod = mx_.mod.BucketingModule(sym_gen, default_bucket_key=4)
    mod.bind(data_shapes=[("data", (2, 4, 3))], label_shapes=[("lro_label", (2, 2))])
    mod.init_params(arg_params={"fc_weight": mx_.nd.array(inputs["w"]),
                                "fc_bias": mx_.nd.zeros((2,))})
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.5})
    outs = []
    for length in (4, 6, 2, 6):
        x = mx_.nd.array(inputs[f"x{length}"])
        batch = mx_.io.DataBatch([x], [mx_.nd.array(inputs["y"])], bucket_key=length,
                                 provide_data=[("data", x.shape)],
                                 provide_label=[("lro_label", (2, 2))])
        mod.forward(batch, is_train=True)
        outs.append(mod.get_outputs()[0].asnumpy())
        mod.backward()
        mod.update()
    arg = mod.get_params()[0]
    return outs, arg["fc_weight"].asnumpy(), sorted(mod._buckets)


def test_bucketing_module_shares_parameters_across_buckets_as_mxnet():
    import inspect

    rng = np.random.default_rng(7)
    inputs = {f"x{n}": rng.normal(size=(2, n, 3)).astype(np.float32) for n in (2, 4, 6)}
    inputs["y"] = rng.normal(size=(2, 2)).astype(np.float32)
    inputs["w"] = rng.normal(size=(2, 3)).astype(np.float32)
    code = (inspect.getsource(_bucketing_run)
            + "outs, w, keys = _bucketing_run(mx, inputs)\n"
              "for i, o in enumerate(outs):\n"
              "    outputs['o%d' % i] = o\n"
              "outputs['w'] = w\n"
              "result['keys'] = keys\n")
    expected = run_mxnet(code, inputs)
    outs, weight, keys = _bucketing_run(mx, inputs)
    for i, out in enumerate(outs):
        np.testing.assert_allclose(out, expected[f"o{i}"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(weight, expected["w"], rtol=1e-5, atol=1e-6)
    assert keys == expected.json["keys"]


def _reshape_and_monitor(mx_, inputs):
    data = mx_.sym.var("data")
    fc = mx_.sym.FullyConnected(data, num_hidden=3, name="fc")
    net = mx_.sym.Activation(fc, act_type="relu", name="relu")
    mod = mx_.mod.Module(net, label_names=None)
    mod.bind(data_shapes=[("data", (4, 5))], for_training=False)
    mod.init_params(arg_params={"fc_weight": mx_.nd.array(inputs["w"]),
                                "fc_bias": mx_.nd.ones((3,))})
    mod.reshape(data_shapes=[("data", (2, 5))])
    mon = mx_.mon.Monitor(1, pattern=".*", sort=True)
    mod.install_monitor(mon)
    mon.tic()
    mod.forward(mx_.io.DataBatch([mx_.nd.array(inputs["x"])], None))
    stats = [(step, name, float(text.split()[0])) for step, name, text in mon.toc()]
    return mod.get_outputs()[0].asnumpy(), [list(s) for _, s in mod.data_shapes], stats


def test_reshape_and_monitor_match_mxnet():
    import inspect

    rng = np.random.default_rng(8)
    inputs = {"x": rng.normal(size=(2, 5)).astype(np.float32),
              "w": rng.normal(size=(3, 5)).astype(np.float32)}
    # MXNet's oneDNN fusion would rename fc+relu to one fused node: compare unfused graphs
    code = ("import os\nos.environ['MXNET_SUBGRAPH_BACKEND'] = 'NONE'\n"
            + inspect.getsource(_reshape_and_monitor)
            + "out, shapes, stats = _reshape_and_monitor(mx, inputs)\n"
              "outputs['out'] = out\n"
              "result['shapes'] = shapes\n"
              "result['stats'] = stats\n")
    expected = run_mxnet(code, inputs)
    out, shapes, stats = _reshape_and_monitor(mx, inputs)
    np.testing.assert_allclose(out, expected["out"], rtol=1e-5)
    assert shapes == expected.json["shapes"]
    assert [(s, n) for s, n, _ in stats] == [(s, n) for s, n, _ in expected.json["stats"]]
    np.testing.assert_allclose([v for _, _, v in stats],
                               [v for _, _, v in expected.json["stats"]], rtol=1e-5)


def _make_loss_training(mx_, inputs):
    """A Module trained on a loss written with symbol ops (what Gluon losses produce when
    called on symbols): softmax cross-entropy via log_softmax/pick plus an L2 term."""
    sym = mx_.sym
    data, label = sym.var("data"), sym.var("label")
    fc = sym.FullyConnected(data, num_hidden=3, name="fc")
    ce = -sym.pick(sym.log_softmax(fc, axis=-1), label, axis=-1, keepdims=True)
    l2 = sym.mean(sym.square(fc), axis=1, exclude=False, keepdims=True) * 0.1
    loss = sym.MakeLoss(sym.mean(ce + l2, axis=0, exclude=True), name="loss")
    net = sym.Group([loss, sym.BlockGrad(sym.softmax(fc), name="prob")])
    mod = mx_.mod.Module(net, data_names=["data"], label_names=["label"])
    mod.bind(data_shapes=[("data", (6, 4))], label_shapes=[("label", (6,))])
    mod.init_params(arg_params={"fc_weight": mx_.nd.array(inputs["w"]),
                                "fc_bias": mx_.nd.zeros((3,))})
    mod.init_optimizer(optimizer="adam", optimizer_params={"learning_rate": 0.05})
    batch = mx_.io.DataBatch([mx_.nd.array(inputs["x"])], [mx_.nd.array(inputs["y"])])
    losses = []
    for _ in range(4):
        mod.forward(batch)
        losses.append(mod.get_outputs()[0].asnumpy())
        mod.backward()
        mod.update()
    return losses, mod.get_params()[0]["fc_weight"].asnumpy(), mod.output_names


def test_module_trains_a_loss_written_with_symbol_ops_as_mxnet():
    import inspect

    rng = np.random.default_rng(9)
    inputs = {"x": rng.normal(size=(6, 4)).astype(np.float32),
              "y": rng.integers(0, 3, size=(6,)).astype(np.float32),
              "w": rng.normal(scale=0.5, size=(3, 4)).astype(np.float32)}
    code = (inspect.getsource(_make_loss_training)
            + "losses, w, names = _make_loss_training(mx, inputs)\n"
              "for i, v in enumerate(losses):\n"
              "    outputs['loss%d' % i] = v\n"
              "outputs['w'] = w\n"
              "result['names'] = names\n")
    expected = run_mxnet(code, inputs)
    losses, weight, names = _make_loss_training(mx, inputs)
    assert names == expected.json["names"]
    for i, value in enumerate(losses):
        np.testing.assert_allclose(value, expected[f"loss{i}"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(weight, expected["w"], rtol=1e-4, atol=1e-6)


def test_checkpoint_files_round_trip_and_load_in_mxnet(tmp_path):
    prefix = str(tmp_path / "net")
    with mx.name.NameManager():
        data = mx.sym.var("data")
        h = mx.sym.LeakyReLU(mx.sym.FullyConnected(data, num_hidden=3, name="fc"),
                             act_type="prelu", name="act")
        net = mx.sym.log_softmax(mx.sym.sum(mx.sym.expand_dims(h, axis=1), axis=1), axis=-1)
    rng = np.random.default_rng(10)
    arg = {"fc_weight": nd.array(rng.normal(size=(3, 4)).astype(np.float32)),
           "fc_bias": nd.array(rng.normal(size=(3,)).astype(np.float32)),
           "act_gamma": nd.array([0.1, 0.2, 0.3])}
    mx.model.save_checkpoint(prefix, 7, net, arg, {})
    sym, arg2, aux2 = mx.model.load_checkpoint(prefix, 7)
    assert sym.tojson() == net.tojson() and aux2 == {}
    x = rng.normal(size=(2, 4)).astype(np.float32)
    ours = sym.eval(data=nd.array(x), **arg2)[0].asnumpy()
    with open(f"{prefix}-symbol.json") as handle:
        text = handle.read()
    code = ("net = mx.sym.load_json(" + repr(text) + ")\n"
            "args = {k: nd.array(v) for k, v in inputs.items()}\n"
            "outputs['out'] = net.eval(**args)[0]\n"
            "result['args'] = net.list_arguments()\n")
    inputs = {"data": x, **{k: v.asnumpy() for k, v in arg.items()}}
    expected = run_mxnet(code, inputs)
    assert expected.json["args"] == sym.list_arguments()
    np.testing.assert_allclose(ours, expected["out"], rtol=1e-5, atol=1e-6)


def _batch_of_another_size(mx_, inputs):
    net = mx_.sym.FullyConnected(mx_.sym.var("data"), num_hidden=2, name="fc")
    mod = mx_.mod.Module(mx_.sym.LinearRegressionOutput(net, name="lro"),
                         label_names=["lro_label"])
    mod.bind(data_shapes=[("data", (4, 3))], label_shapes=[("lro_label", (4, 2))])
    mod.init_params(arg_params={"fc_weight": mx_.nd.array(inputs["w"]),
                                "fc_bias": mx_.nd.zeros((2,))})
    mod.forward(mx_.io.DataBatch([mx_.nd.array(inputs["x"])], [mx_.nd.array(inputs["y"])]))
    shapes = [[name, list(shape)] for name, shape in mod.data_shapes + mod.label_shapes]
    return mod.get_outputs()[0].asnumpy(), shapes


def test_forward_on_a_batch_of_another_size_reshapes_as_mxnet():
    import inspect

    rng = np.random.default_rng(12)
    inputs = {"x": rng.normal(size=(6, 3)).astype(np.float32),
              "y": rng.normal(size=(6, 2)).astype(np.float32),
              "w": rng.normal(size=(2, 3)).astype(np.float32)}
    code = (inspect.getsource(_batch_of_another_size)
            + "out, shapes = _batch_of_another_size(mx, inputs)\n"
              "outputs['out'] = out\nresult['shapes'] = shapes\n")
    expected = run_mxnet(code, inputs)
    out, shapes = _batch_of_another_size(mx, inputs)
    np.testing.assert_allclose(out, expected["out"], rtol=1e-6)
    assert shapes == expected.json["shapes"]


def test_bucketing_module_checkpoint_round_trip(tmp_path):
    rng = np.random.default_rng(16)
    inputs = {"w": rng.normal(size=(2, 3)).astype(np.float32)}

    def sym_gen(length):
        data = mx.sym.var("data")
        fc = mx.sym.FullyConnected(mx.sym.sum(data, axis=1) / length, num_hidden=2, name="fc")
        return mx.sym.LinearRegressionOutput(fc, name="lro"), ("data",), ("lro_label",)

    mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=4)
    mod.bind(data_shapes=[("data", (2, 4, 3))], label_shapes=[("lro_label", (2, 2))])
    mod.init_params(arg_params={"fc_weight": nd.array(inputs["w"]),
                                "fc_bias": nd.ones((2,))})
    mod.switch_bucket(6, [("data", (2, 6, 3))], [("lro_label", (2, 2))])
    prefix = str(tmp_path / "bucketed")
    mod.save_checkpoint(prefix, 3)
    assert (tmp_path / "bucketed-6-symbol.json").exists()
    loaded = mx.mod.BucketingModule.load(prefix, 3, sym_gen=sym_gen, default_bucket_key=4)
    assert loaded._saved_keys == [4, 6]
    loaded.bind(data_shapes=[("data", (2, 4, 3))], label_shapes=[("lro_label", (2, 2))],
                for_training=False)
    arg, _ = loaded.get_params()
    np.testing.assert_array_equal(arg["fc_weight"].asnumpy(), inputs["w"])
    np.testing.assert_array_equal(arg["fc_bias"].asnumpy(), [1, 1])
