"""The Gluon convolution and pooling layers against MXNet 1.9.1: the same source builds each
layer in both, sets the same weights, and compares parameter names and shapes (including
deferred in_channels), outputs, gradients and repr.

MXNet runs once for the module (oracle venv; skipped when absent).
"""

import textwrap

import numpy as np
import pytest

import engine
from engine import autograd, gluon, nd
from tests.oracle import needs_mxnet, run_mxnet

rng = np.random.RandomState(3)
INPUTS = {k: np.asarray(v, dtype=np.float32) for k, v in {
    "x1": rng.randn(2, 4, 10), "x2": rng.randn(2, 4, 7, 6), "x3": rng.randn(1, 4, 5, 4, 5),
}.items()}

# (class name, data, constructor arguments as source)
CONV_LAYERS = [
    ("Conv1D", "x1", "6, 3, strides=2, padding=1, dilation=2, groups=2, activation='relu'"),
    ("Conv2D", "x2", "6, (3, 2), strides=(2, 1), padding=(1, 1), groups=2"),
    ("Conv3D", "x3", "3, 2, strides=(1, 2, 1), padding=1, dilation=(2, 1, 1), use_bias=False"),
    ("Conv1DTranspose", "x1", "3, 3, strides=2, padding=1, output_padding=1"),
    ("Conv2DTranspose", "x2", "6, (3, 2), strides=(2, 3), padding=(1, 0), output_padding=(1, 2),"
                              " groups=2, activation='tanh', in_channels=4"),
    ("Conv3DTranspose", "x3", "2, (2, 3, 2), strides=2, padding=(0, 1, 1)"),
]
POOL_LAYERS = [
    ("MaxPool1D", "x1", "3, 2, 1"), ("AvgPool1D", "x1", "4, 3, ceil_mode=True"),
    ("MaxPool2D", "x2", "(3, 2), ceil_mode=True"), ("MaxPool2D", "x2", ""),
    ("AvgPool2D", "x2", "3, 2, 1, count_include_pad=False"),
    ("AvgPool2D", "x2", "(3, 2), (1, 2), (1, 0), ceil_mode=True"),
    ("MaxPool3D", "x3", "2, 2, 1"), ("AvgPool3D", "x3", "(2, 3, 2), 1, (1, 0, 1), True, "
                                                        "count_include_pad=False"),
    ("GlobalMaxPool1D", "x1", ""), ("GlobalAvgPool2D", "x2", ""), ("GlobalMaxPool3D", "x3", ""),
    ("GlobalAvgPool3D", "x3", ""),
]

CASE = f"""
for i, (cls, data, args) in enumerate({CONV_LAYERS!r} + {POOL_LAYERS!r}):
    prefix = "l%d_" % i
    layer = eval("gluon.nn.%s(%s%sprefix=prefix)" % (cls, args, ", " if args else ""))
    result["repr%d" % i] = repr(layer)
    x = nd.array(inputs[data])
    layer.initialize()
    x.attach_grad()
    with autograd.record():
        y = layer(x)  # deferred init: in_channels comes from x
    params = layer.collect_params()
    result["params%d" % i] = sorted([k, list(p.shape)] for k, p in params.items())
    # the same weights in both: set from a fixed formula, then run again
    for k, p in sorted(params.items()):
        size = int(np.prod(p.shape))
        p.set_data(nd.array(np.sin(np.arange(size) * 0.37 + len(k)).reshape(p.shape)))
    with autograd.record():
        y = layer(x)
    y.backward(nd.cos(y))
    outputs["y%d" % i] = y
    outputs["gx%d" % i] = x.grad
    for k, p in sorted(params.items()):
        outputs["g%d_%s" % (i, k[len(prefix):])] = p.grad()
"""


@pytest.fixture(scope="module")
def mxnet_results():
    return run_mxnet(CASE, INPUTS, timeout=300)


def run_engine():
    scope = {"mx": engine, "nd": nd, "autograd": autograd, "gluon": gluon, "np": np}
    outputs, result = {}, {}
    scope.update(inputs={k: v.copy() for k, v in INPUTS.items()}, outputs=outputs, result=result)
    exec(textwrap.dedent(CASE), scope)  # the fixed test source above
    return {k: v.asnumpy() for k, v in outputs.items()}, result


@needs_mxnet
def test_layers_match_mxnet(mxnet_results):
    ours, result = run_engine()
    theirs = mxnet_results.arrays
    for i in range(len(CONV_LAYERS) + len(POOL_LAYERS)):
        assert result[f"params{i}"] == mxnet_results.json[f"params{i}"], i
    assert sorted(ours) == sorted(theirs)
    for key in sorted(theirs):
        assert ours[key].shape == theirs[key].shape, key
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-4, atol=1e-4, err_msg=key)


@needs_mxnet
def test_reprs_match_mxnet(mxnet_results):
    _, result = run_engine()
    for i in range(len(CONV_LAYERS) + len(POOL_LAYERS)):
        assert result[f"repr{i}"] == mxnet_results.json[f"repr{i}"]


def test_channels_last_layers_take_mxnets_weight_shapes():
    conv = gluon.nn.Conv2D(6, (3, 2), layout="NHWC", groups=2)
    up = gluon.nn.Conv3DTranspose(4, 2, strides=2, layout="NDHWC")
    conv.initialize()
    up.initialize()
    assert conv(nd.ones((2, 7, 6, 4))).shape == (2, 5, 5, 6)
    assert conv.weight.shape == (6, 3, 2, 2)  # (channels, *kernel, in_channels/groups)
    assert up(nd.ones((1, 3, 3, 3, 5))).shape == (1, 6, 6, 6, 4)
    assert up.weight.shape == (5, 2, 2, 2, 4)  # (in_channels, *kernel, channels/groups)
    pool = gluon.nn.MaxPool1D(layout="NWC")
    assert pool(nd.ones((2, 8, 3))).shape == (2, 4, 3)


def test_bad_layouts_and_groups_are_refused():
    with pytest.raises(ValueError, match="layout"):
        gluon.nn.Conv2D(4, 3, layout="NCW")
    with pytest.raises(ValueError, match="groups"):
        gluon.nn.Conv2D(6, 3, groups=4)
    with pytest.raises(ValueError, match="layout"):
        gluon.nn.AvgPool3D(layout="NHWC")
