"""gluon.contrib.nn against MXNet 1.9.1 (PixelShuffle*, Concurrent, HybridConcurrent,
Identity, SyncBatchNorm on one device), and MXNet's path to the Estimator."""

import numpy as np
import pytest

import engine
from tests.engine.gluon.differential import compare, oracle_results
from tests.oracle import needs_mxnet

pytestmark = needs_mxnet

rng = np.random.RandomState(5)
INPUTS = {k: np.asarray(v, dtype=np.float32) for k, v in {
    "x1": rng.randn(2, 6, 5), "x2": rng.randn(2, 12, 3, 4), "x3": rng.randn(1, 16, 2, 3, 2),
    "flat": rng.randn(3, 4), "bn": rng.randn(4, 3, 2, 2) * 2 + 1,
}.items()}

CASES = {
    "pixel_shuffle": """
        cnn = gluon.contrib.nn
        specs = [(cnn.PixelShuffle1D(3), "x1"), (cnn.PixelShuffle2D(2), "x2"),
                 (cnn.PixelShuffle2D((3, 2)), "x2"), (cnn.PixelShuffle3D((2, 2, 2)), "x3"),
                 (cnn.PixelShuffle3D(2), "x3")]
        for i, (layer, name) in enumerate(specs):
            x = nd.array(inputs[name])
            x.attach_grad()
            with autograd.record():
                y = layer(x)
            y.backward(nd.arange(y.size).reshape(y.shape))
            outputs.update({"y%d" % i: y, "gx%d" % i: x.grad})
        result["repr"] = [repr(layer) for layer, _ in specs]
    """,
    "concurrent": """
        cnn = gluon.contrib.nn
        for i, cls in enumerate([cnn.Concurrent, cnn.HybridConcurrent]):
            net = cls(axis=1, prefix="cat_")
            with net.name_scope():
                net.add(gluon.nn.Dense(2, in_units=4), cnn.Identity(),
                        gluon.nn.Dense(3, in_units=4, activation="tanh"))
            net.initialize()
            for k, p in enumerate(net.collect_params().values()):
                p.set_data(nd.array(np.cos(np.arange(np.prod(p.shape)) + k).reshape(p.shape)))
            x = nd.array(inputs["flat"])
            x.attach_grad()
            with autograd.record():
                y = net(x)
            y.backward(nd.sin(y))
            outputs.update({"y%d" % i: y, "gx%d" % i: x.grad})
            result["names%d" % i] = list(net.collect_params().keys())
    """,
    "sync_batchnorm": """
        cnn = gluon.contrib.nn
        layer = cnn.SyncBatchNorm(in_channels=3, num_devices=1, momentum=0.8)
        layer.initialize()
        x = nd.array(inputs["bn"])
        x.attach_grad()
        with autograd.record():
            y = layer(x)
        y.backward(nd.cos(y))
        outputs.update({"y": y, "gx": x.grad, "rm": layer.running_mean.data(),
                        "rv": layer.running_var.data(), "infer": layer(x)})
        result["params"] = sorted(k.split("_", 1)[1] for k in layer.collect_params())
    """,
}


@pytest.fixture(scope="module")
def mxnet():
    return oracle_results(CASES, INPUTS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_contrib_layers_match_mxnet(name, mxnet):
    ours, theirs = compare(CASES, name, INPUTS, mxnet, rtol=1e-4, atol=1e-5)
    assert ours == theirs


def test_estimator_is_importable_at_mxnets_contrib_path():
    from engine.gluon.contrib.estimator import Estimator, LoggingHandler

    assert Estimator is engine.gluon.estimator.Estimator
    assert LoggingHandler is engine.gluon.estimator.LoggingHandler
    assert engine.gluon.contrib.estimator.Estimator is Estimator


def test_pixel_shuffle_rejects_channels_not_divisible_by_the_factors():
    from engine.gluon.contrib import nn as cnn

    with pytest.raises(ValueError):
        cnn.PixelShuffle2D(2)(engine.nd.ones((1, 6, 2, 2)))


def test_hybrid_concurrent_hybridizes_and_runs_on_symbols():
    """DenseNet and SqueezeNet join branches with HybridConcurrent: hybridized it must give
    the imperative result (no fallback warning, which filterwarnings=error would raise),
    and on a Symbol it must build a graph with a Concat node."""
    from engine.gluon.contrib import nn as cnn

    def branches():
        net = cnn.HybridConcurrent(axis=1, prefix="cat_")
        with net.name_scope():
            net.add(cnn.Identity(), engine.gluon.nn.Conv2D(3, 1, in_channels=2))
        net.initialize(engine.init.Xavier())
        return net

    net = branches()
    x = engine.nd.array(np.arange(18, dtype=np.float32).reshape(1, 2, 3, 3))
    expected = net(x).asnumpy()
    net.hybridize()
    for _ in range(2):  # the first call traces, the second replays the program
        np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=1e-6)
    assert expected.shape == (1, 5, 3, 3)
    graph = net(engine.sym.var("data"))
    assert "Concat" in graph.tojson()
