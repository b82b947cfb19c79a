"""gluon.nn layers: values, deferred shapes, numerical gradients of each layer's math
(float64), the layer registry, and errors that name the problem."""

import numpy as np
import pytest

from engine import autograd, init, nd
from engine.gluon import nn
from tests.engine.gradcheck import CONTEXTS, check_grad

rng = np.random.default_rng(1)


def check_layer(layer, x, ctx, train_mode=True):
    """Gradcheck the layer's hybrid_forward over its input and trainable parameters, and check
    that calling the layer writes the same gradients into the Parameters."""
    layer.initialize(init.Uniform(0.5), ctx=ctx)
    layer.cast("float64")
    with autograd.pause(train_mode=train_mode):
        layer(nd.array(x, ctx=ctx, dtype="float64"))  # completes deferred shapes
    names = list(layer._reg_params)
    trainable = [i for i, n in enumerate(names) if layer._reg_params[n].grad_req != "null"]
    values = [layer._reg_params[n].data().asnumpy() for n in names]

    def fn(x, *params):
        return layer.hybrid_forward(nd, x, **dict(zip(names, params, strict=True)))

    grads = check_grad(fn, [x, *values], ctx=ctx, train_mode=train_mode,
                       wrt=[0] + [i + 1 for i in trainable])
    if not trainable:
        return
    xs = nd.array(x, ctx=ctx, dtype="float64")
    for n, v in zip(names, values, strict=True):
        layer._reg_params[n].set_data(v)
    with autograd.record(train_mode=train_mode):
        out = layer(xs)
    head = np.random.default_rng(0).uniform(0.5, 1.5, size=out.shape)
    out.backward(nd.array(head, ctx=ctx, dtype="float64"))
    for g, i in zip(grads[1:], trainable, strict=True):
        np.testing.assert_allclose(layer._reg_params[names[i]].grad().asnumpy(), g, rtol=1e-6,
                                   atol=1e-8)


@pytest.mark.parametrize("ctx", CONTEXTS)
def test_dense_gradients_and_flatten(ctx):
    check_layer(nn.Dense(3, activation="tanh"), rng.standard_normal((2, 2, 3)), ctx)
    layer = nn.Dense(3, flatten=False)
    layer.initialize(ctx=ctx)
    assert layer(nd.ones((2, 5, 4), ctx=ctx)).shape == (2, 5, 3)
    assert layer.weight.shape == (3, 4)


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("kwargs", [
    dict(channels=4, kernel_size=3),
    dict(channels=4, kernel_size=(3, 2), strides=2, padding=1, groups=2, activation="relu"),
    dict(channels=2, kernel_size=2, dilation=2, padding=1, use_bias=False),
], ids=["plain", "stride_pad_groups", "dilation"])
def test_conv2d_gradients(kwargs, ctx):
    check_layer(nn.Conv2D(**kwargs), rng.standard_normal((2, 2, 6, 5)), ctx)


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("layer", [
    lambda: nn.MaxPool2D(pool_size=3, strides=2, padding=1),
    lambda: nn.AvgPool2D(pool_size=2, ceil_mode=True),
    lambda: nn.AvgPool2D(pool_size=3, strides=1, padding=1, count_include_pad=False),
    nn.GlobalAvgPool2D, nn.GlobalMaxPool2D,
], ids=["max", "avg_ceil", "avg_exclude_pad", "global_avg", "global_max"])
def test_pool_layer_gradients(layer, ctx):
    check_layer(layer(), rng.standard_normal((2, 2, 5, 5)), ctx)


@pytest.mark.parametrize("ctx", CONTEXTS)
def test_batchnorm_layer_train_and_inference(ctx):
    check_layer(nn.BatchNorm(), rng.standard_normal((4, 3, 2, 2)), ctx, train_mode=True)
    bn = nn.BatchNorm(momentum=0.5)
    bn.initialize(ctx=ctx)
    x = nd.array(rng.standard_normal((8, 2)) * 3 + 1, ctx=ctx)
    bn(x)  # inference: running stats are untouched and used
    np.testing.assert_array_equal(bn.running_mean.data().asnumpy(), [0, 0])
    np.testing.assert_array_equal(bn.running_var.data().asnumpy(), [1, 1])
    with autograd.record():
        bn(x)
    # the mean in float64 against numpy's float32 mean of data of scale 3: a mean near zero
    # (drawn depending on the tests before) differs from it by ~1e-8, not 1e-5 of itself
    np.testing.assert_allclose(bn.running_mean.data().asnumpy(),
                               0.5 * x.asnumpy().astype(np.float64).mean(0), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(bn.running_var.data().asnumpy(),
                               0.5 + 0.5 * x.asnumpy().var(0), rtol=1e-5)
    frozen = nn.BatchNorm(use_global_stats=True, in_channels=2)
    frozen.initialize(ctx=ctx)
    with autograd.record():
        y = frozen(x)
    np.testing.assert_allclose(y.asnumpy(), x.asnumpy() / np.sqrt(1 + 1e-5), rtol=1e-5)
    assert frozen.running_mean.grad_req == "null"


@pytest.mark.parametrize("ctx", CONTEXTS)
def test_layernorm_embedding_prelu_gradients(ctx):
    check_layer(nn.LayerNorm(), rng.standard_normal((3, 4)), ctx)
    check_layer(nn.PReLU(in_channels=3), rng.standard_normal((2, 3, 2)), ctx)
    for act in (nn.SELU(), nn.ELU(0.7), nn.LeakyReLU(0.1), nn.Swish(1.5)):
        check_layer(act, rng.standard_normal((3, 4)) + 0.05, ctx)  # true derivatives
    emb = nn.Embedding(6, 3)
    emb.initialize(ctx=ctx)
    idx = nd.array([[0, 5], [2, 2]], ctx=ctx)
    with autograd.record():
        out = emb(idx)
    out.backward()
    assert out.shape == (2, 2, 3)
    np.testing.assert_array_equal(emb.weight.grad().asnumpy()[:, 0], [1, 0, 2, 0, 0, 1])


def test_activation_layers_values():
    x = nd.array([-2.0, 0.5])
    np.testing.assert_allclose(nn.Activation("relu")(x).asnumpy(), [0, 0.5])
    np.testing.assert_allclose(nn.LeakyReLU(0.1)(x).asnumpy(), [-0.2, 0.5], rtol=1e-6)
    np.testing.assert_allclose(nn.ELU(1.0)(x).asnumpy(), [np.expm1(-2), 0.5], rtol=1e-6)
    selu = 1.0507009873554805 * np.array([1.6732632423543772 * np.expm1(-2), 0.5])
    np.testing.assert_allclose(nn.SELU()(x).asnumpy(), selu, rtol=1e-6)
    np.testing.assert_allclose(nn.Swish()(x).asnumpy(), x.asnumpy() / (1 + np.exp(-x.asnumpy())),
                               rtol=1e-6)
    prelu = nn.PReLU()
    prelu.initialize()
    np.testing.assert_allclose(prelu.alpha.data().asnumpy(), [0.25])
    np.testing.assert_allclose(prelu(x).asnumpy(), [-0.5, 0.5])
    assert nn.GELU()(x).shape == (2,)


def test_dropout_only_in_training():
    drop = nn.Dropout(0.5)
    x = nd.ones((200, 10))
    np.testing.assert_array_equal(drop(x).asnumpy(), x.asnumpy())
    with autograd.record():
        y = drop(x).asnumpy()
    assert set(np.unique(y)) == {0.0, 2.0} and 0.4 < (y == 0).mean() < 0.6
    with pytest.raises(ValueError, match="rate"):
        nn.Dropout(1.5)


def test_sequential_containers():
    net = nn.Sequential()
    net.add(nn.Dense(4, activation="relu"), nn.Dropout(0.2), nn.Dense(1))
    net.initialize()
    assert len(net) == 3 and isinstance(net[2], nn.Dense)
    assert net(nd.ones((2, 3))).shape == (2, 1)
    head = net[:2]
    assert len(head) == 2 and head(nd.ones((2, 3))).shape == (2, 4)
    lam = nn.HybridLambda(lambda F, x: F.relu(x) * 2)
    np.testing.assert_array_equal(lam(nd.array([-1, 1])).asnumpy(), [0, 2])
    np.testing.assert_array_equal(nn.Lambda("tanh")(nd.zeros(2)).asnumpy(), [0, 0])
    assert nn.Flatten()(nd.ones((2, 3, 4))).shape == (2, 12)


def test_dense_shape_mismatch_names_the_layer():
    dense = nn.Dense(2, in_units=3, prefix="head_")
    dense.initialize()
    with pytest.raises(ValueError, match=r"head.*Dense 3 -> 2.*input has 5 features"):
        dense(nd.ones((4, 5)))
    conv = nn.Conv2D(2, 3, in_channels=3)
    conv.initialize()
    with pytest.raises(ValueError, match="Conv2D"):
        conv(nd.ones((1, 4, 5, 5)))


def test_registry_builds_layers_from_specs():
    spec = [{"type": "Conv2D", "channels": 4, "kernel_size": 3},
            {"type": "maxpool2d"}, {"type": "FLATTEN"},
            {"type": "Dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 2}]
    net = nn.HybridSequential()
    for layer in spec:
        kwargs = {k: v for k, v in layer.items() if k != "type"}
        net.add(nn.create(layer["type"], **kwargs))
    net.initialize()
    assert net(nd.ones((2, 1, 8, 8))).shape == (2, 2)
    with pytest.raises(ValueError, match="unknown layer 'Densee'.*dense"):
        nn.create("Densee", units=3)
    assert {"dense", "conv2d", "batchnorm", "layernorm", "embedding", "prelu"} <= set(nn.names())
    with pytest.raises(ValueError, match="already registered"):
        nn.register(type("Dense", (nn.HybridBlock,), {}))


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("layer", [
    lambda: nn.Conv1D(4, 3, strides=2, padding=1, groups=2),
    lambda: nn.Conv1D(2, 2, dilation=2, activation="tanh"),
    lambda: nn.MaxPool1D(3, 2, 1), lambda: nn.AvgPool1D(2, ceil_mode=True),
    nn.GlobalAvgPool1D, nn.GlobalMaxPool1D,
], ids=["conv1d_stride_groups", "conv1d_dilation", "maxpool1d", "avgpool1d", "global_avg1d",
        "global_max1d"])
def test_one_dimensional_layers(layer, ctx):
    check_layer(layer(), rng.standard_normal((2, 2, 7)), ctx)
    conv = nn.Conv1D(3, 3, padding=1)
    conv.initialize(ctx=ctx)
    assert conv(nd.ones((2, 5, 8), ctx=ctx)).shape == (2, 3, 8)
    assert conv.weight.shape == (3, 5, 3)
    assert nn.GlobalMaxPool1D()(nd.ones((2, 5, 8), ctx=ctx)).shape == (2, 5, 1)
