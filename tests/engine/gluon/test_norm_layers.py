"""InstanceNorm, GroupNorm, BatchNormReLU, ReflectionPad2D and Dense(0) against MXNet 1.9.1:
outputs, input gradients and parameter gradients for the same inputs."""

import numpy as np
import pytest

from tests.engine.gluon.differential import compare, oracle_results
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

rng = np.random.RandomState(3)
INPUTS = {k: np.asarray(v, dtype=np.float32) for k, v in {
    "x4": rng.randn(2, 4, 3, 5) * 2 + 1, "x3": rng.randn(3, 6, 4),
    "gamma4": rng.rand(4) + 0.5, "beta4": rng.randn(4), "gamma2": rng.rand(2) + 0.5,
    "beta2": rng.randn(2), "small": rng.randn(1, 2, 3, 4),
}.items()}

CASES = {
    "instance_norm": """
        for i, (kw, name) in enumerate([({}, "x4"), ({"scale": True}, "x4"),
                                        ({"axis": 2, "scale": True}, "x3"),
                                        ({"center": False, "epsilon": 0.1}, "x3")]):
            layer = gluon.nn.InstanceNorm(**kw)
            layer.initialize()
            x = nd.array(inputs[name])
            layer(x)
            c = layer.gamma.shape[0]
            layer.gamma.set_data(nd.array(np.linspace(0.5, 1.5, c)))
            layer.beta.set_data(nd.array(np.linspace(-1, 1, c)))
            x.attach_grad()
            with autograd.record():
                y = layer(x)
            y.backward(nd.cos(y))
            outputs.update({"y%d" % i: y, "gx%d" % i: x.grad})
            if layer.gamma.grad_req != "null":
                outputs["gg%d" % i] = layer.gamma.grad()
            if layer.beta.grad_req != "null":
                outputs["gb%d" % i] = layer.beta.grad()
        result["repr"] = repr(gluon.nn.InstanceNorm(in_channels=3))
    """,
    "group_norm": """
        for i, groups in enumerate([1, 2, 4]):
            layer = gluon.nn.GroupNorm(num_groups=groups)
            layer.initialize()
            layer.gamma.set_data(nd.array(np.linspace(0.5, 1.5, groups)))
            layer.beta.set_data(nd.array(np.linspace(-1, 1, groups)))
            x = nd.array(inputs["x4"])
            x.attach_grad()
            with autograd.record():
                y = layer(x)
            y.backward(nd.cos(y))
            outputs.update({"y%d" % i: y, "gx%d" % i: x.grad, "gg%d" % i: layer.gamma.grad(),
                            "gb%d" % i: layer.beta.grad()})
        result["params"] = sorted(k.split("_", 1)[1] for k in layer.collect_params())
    """,
    "batchnorm_relu": """
        layer = gluon.nn.BatchNormReLU(in_channels=4)
        layer.initialize()
        x = nd.array(inputs["x4"])
        x.attach_grad()
        with autograd.record():
            y = layer(x)
        y.backward(nd.cos(y))
        outputs.update({"y": y, "gx": x.grad, "rm": layer.running_mean.data(),
                        "infer": layer(x)})
    """,
    "reflection_pad": """
        for i, pad in enumerate([1, 2, (0, 0, 0, 0, 2, 0, 1, 3)]):
            x = nd.array(inputs["small"])
            x.attach_grad()
            with autograd.record():
                y = gluon.nn.ReflectionPad2D(pad)(x)
            y.backward(nd.cos(y) * nd.arange(y.size).reshape(y.shape))
            outputs.update({"y%d" % i: y, "gx%d" % i: x.grad})
    """,
    "pad_modes": """
        x5 = nd.array(inputs["small"]).reshape((1, 2, 3, 2, 2))
        specs = [(nd.array(inputs["small"]), "constant", (0, 0, 0, 0, 1, 2, 0, 3), 1.5),
                 (nd.array(inputs["small"]), "edge", (0, 0, 0, 0, 2, 1, 3, 1), 0),
                 (nd.array(inputs["small"]), "reflect", (0, 0, 0, 0, 2, 2, 3, 3), 0),
                 (x5, "edge", (0, 0, 0, 0, 1, 1, 0, 2, 1, 0), 0),
                 (x5, "constant", (0, 0, 0, 0, 1, 0, 1, 1, 0, 1), -2.0)]
        for i, (x, mode, width, value) in enumerate(specs):
            x.attach_grad()
            with autograd.record():
                y = nd.pad(x, mode=mode, pad_width=width, constant_value=value)
            y.backward(nd.sin(nd.arange(y.size).reshape(y.shape)))
            outputs.update({"y%d" % i: y, "gx%d" % i: x.grad})
    """,
    "dense_zero_units": """
        layer = gluon.nn.Dense(0, in_units=3)
        result["params"] = [list(p.shape) for p in layer.collect_params().values()]
        layer.initialize()
        try:
            layer(nd.ones((2, 3)))
        except ValueError:
            result["forward"] = "ValueError"
    """,
}


@pytest.fixture(scope="module")
def mxnet():
    return oracle_results(CASES, INPUTS)


@pytest.mark.parametrize("name", ["instance_norm", "group_norm", "batchnorm_relu",
                                  "reflection_pad", "pad_modes"])
def test_layer_outputs_and_gradients_match_mxnet(name, mxnet):
    compare(CASES, name, INPUTS, mxnet, rtol=1e-4, atol=1e-4)


def test_group_norm_has_one_gamma_and_beta_per_group_as_mxnet(mxnet):
    ours, theirs = compare(CASES, "group_norm", INPUTS, mxnet, atol=1e-4)
    assert ours["params"] == theirs["params"]


def test_dense_with_zero_units_builds_and_runs_like_mxnet(mxnet):
    ours, theirs = compare(CASES, "dense_zero_units", INPUTS, mxnet)
    assert ours == theirs


def test_reflection_pad_rejects_a_padding_that_is_not_eight_values():
    from engine.gluon import nn

    with pytest.raises(AssertionError):
        nn.ReflectionPad2D((1, 2))


def test_embedding_with_sparse_grad_gives_mxnets_gradient_values_densely():
    run = run_mxnet("""
layer = gluon.nn.Embedding(10, 4, sparse_grad=True)
layer.initialize()
x = nd.array([3, 4, 2, 0, 3])
with autograd.record():
    y = layer(x)
y.backward()
outputs["grad"] = layer.weight.grad().tostype("default")
result["repr"] = repr(gluon.nn.Embedding(10, 4, dtype="float64"))
""")
    from engine import autograd, gluon, nd

    layer = gluon.nn.Embedding(10, 4, sparse_grad=True)
    layer.initialize()
    with autograd.record():
        y = layer(nd.array([3, 4, 2, 0, 3]))
    y.backward()
    np.testing.assert_array_equal(layer.weight.grad().asnumpy(), run["grad"])
    assert repr(gluon.nn.Embedding(10, 4, dtype="float64")) == run.json["repr"]
