"""The Winograd F(2x2, 3x3) convolution path (engine/ndarray/winograd.py) against the im2col
path and a float64 reference: forward, data gradient, weight gradient and bias gradient.

The thresholds that pick the path per shape (``MIN_HARMONIC_CHANNELS``, ``MIN_TILES``) are lowered
or raised here so that small shapes take the path under test.
"""

import numpy as np
import pytest

from engine import autograd, nd
from engine.ndarray import winograd, winograd4
from tests.engine.gradcheck import check_grad

rng = np.random.RandomState(11)

# (data shape NCHW, filters, pad): odd and even sizes, padding 0, 1 and 2, batch 1
SHAPES = [((1, 3, 5, 5), 2, 0), ((2, 4, 7, 6), 3, 1), ((2, 5, 8, 9), 4, 0),
          ((1, 2, 3, 3), 1, 1), ((3, 17, 11, 12), 8, 2), ((1, 6, 4, 7), 5, 1)]


def _force(monkeypatch, winograd_on: bool) -> None:
    monkeypatch.setattr(winograd, "MIN_HARMONIC_CHANNELS", 1 if winograd_on else 10 ** 9)
    monkeypatch.setattr(winograd, "MIN_TILES", 1)
    monkeypatch.setattr(winograd4, "MIN_TILES", 10 ** 9)  # F(2x2), not F(4x4)


def _run(x, w, b, pad, dtype, gy, layout=None):
    """Output and the gradients of <y, gy> for data, weight and bias, as numpy arrays."""
    arrs = [nd.array(a, dtype=dtype) for a in (x, w, b)]
    for a in arrs:
        a.attach_grad()
    with autograd.record():
        y = nd.Convolution(*arrs, kernel=(3, 3), pad=(pad, pad), num_filter=w.shape[0],
                           layout=layout)
    y.backward(nd.array(gy, dtype=dtype))
    return [y.asnumpy()] + [a.grad.asnumpy() for a in arrs]


@pytest.mark.parametrize("shape,filters,pad", SHAPES)
def test_float32_results_match_a_float64_reference_as_closely_as_im2col(monkeypatch, shape,
                                                                          filters, pad):
    x, w, b = rng.randn(*shape), rng.randn(filters, shape[1], 3, 3) * 0.3, rng.randn(filters)
    out_hw = (shape[2] + 2 * pad - 2, shape[3] + 2 * pad - 2)
    gy = rng.randn(shape[0], filters, *out_hw)
    _force(monkeypatch, False)
    ref = _run(x, w, b, pad, np.float64, gy)
    im2col = _run(x, w, b, pad, np.float32, gy)
    _force(monkeypatch, True)
    wino = _run(x, w, b, pad, np.float32, gy)
    assert not np.array_equal(wino[0], im2col[0])  # the other path really ran
    for name, r, i, got in zip(("y", "gx", "gw", "gb"), ref, im2col, wino, strict=True):
        assert got.shape == r.shape and got.dtype == np.float32
        err = np.abs(got - r).max() / np.abs(r).max()
        im2col_err = np.abs(i - r).max() / np.abs(r).max()
        # measured: at most 6e-7 here, the same order as im2col's own float32 error
        assert err < max(4 * im2col_err, 1e-6), (name, err, im2col_err)


@pytest.mark.parametrize("pad", [0, 1])
def test_gradients_are_exact_in_float64(monkeypatch, pad):
    _force(monkeypatch, True)
    check_grad(lambda x, w, b: nd.Convolution(x, w, b, kernel=(3, 3), pad=(pad, pad),
                                              num_filter=3),
               [rng.randn(2, 4, 5, 6), rng.randn(3, 4, 3, 3), rng.randn(3)])


def test_channels_last_layout_gives_the_channels_first_result(monkeypatch):
    _force(monkeypatch, True)
    x, w, b = rng.randn(2, 5, 6, 7), rng.randn(4, 5, 3, 3), rng.randn(4)
    gy = rng.randn(2, 4, 6, 7)
    first = _run(x, w, b, 1, np.float64, gy)
    last = _run(x.transpose(0, 2, 3, 1), w.transpose(0, 2, 3, 1), b, 1, np.float64,
                gy.transpose(0, 2, 3, 1), layout="NHWC")
    for a, c in zip(first, (last[0].transpose(0, 3, 1, 2), last[1].transpose(0, 3, 1, 2),
                            last[2].transpose(0, 3, 1, 2), last[3]), strict=True):
        np.testing.assert_allclose(c, a, rtol=1e-12, atol=1e-12)


def test_no_bias_and_input_data_without_gradient(monkeypatch):
    """A network's input needs no data gradient: the weight gradient is still right."""
    _force(monkeypatch, True)
    x, w = nd.array(rng.randn(2, 4, 6, 6)), nd.array(rng.randn(3, 4, 3, 3))
    w.attach_grad()
    with autograd.record():
        y = nd.Convolution(x, w, kernel=(3, 3), pad=(1, 1), num_filter=3, no_bias=True)
    y.backward()
    _force(monkeypatch, False)
    w2 = nd.array(w.asnumpy())
    w2.attach_grad()
    with autograd.record():
        y2 = nd.Convolution(x, w2, kernel=(3, 3), pad=(1, 1), num_filter=3, no_bias=True)
    y2.backward()
    np.testing.assert_allclose(y.asnumpy(), y2.asnumpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(w.grad.asnumpy(), w2.grad.asnumpy(), rtol=1e-5, atol=1e-4)


def test_path_choice():
    """Winograd for 3x3 stride-1 ungrouped convolutions with enough channels and tiles."""
    def takes(shape, filters, **kw):
        geometry = {"kernel": (3, 3), "stride": (1, 1), "dilate": (1, 1), "groups": 1,
                    "pad": (1, 1)} | kw
        return winograd.applies(np, shape=shape, filters=filters, **geometry)

    assert takes((64, 8, 8, 64), 128)           # issue 11's third convolution, NHWC
    assert takes((16, 32, 32, 64), 64)          # ResNet-18's first stage
    assert takes((64, 16, 16, 32), 64)          # issue 11's second (harmonic mean 43)
    assert not takes((64, 16, 16, 16), 32)      # harmonic mean 21: transforms outweigh
    assert not takes((64, 32, 32, 3), 32)       # a 3-channel image
    assert not takes((16, 4, 4, 512), 512)      # 64 tiles
    assert not takes((64, 8, 8, 64), 128, stride=(2, 2))
    assert not takes((64, 8, 8, 64), 128, dilate=(2, 2))
    assert not takes((64, 8, 8, 64), 128, groups=2)
    assert not takes((64, 8, 8, 64), 128, kernel=(3, 2))


def test_hybridized_training_step_is_bit_identical(monkeypatch):
    """A hybridized block replays nd.Convolution, Winograd path included, bit for bit."""
    from engine import gluon

    _force(monkeypatch, True)
    x = nd.array(rng.randn(2, 3, 6, 6).astype(np.float32))
    weights = None
    results = []
    for hybrid in (False, True):
        net = gluon.nn.HybridSequential()
        net.add(gluon.nn.Conv2D(5, 3, padding=1, in_channels=3), gluon.nn.Activation("relu"),
                gluon.nn.Conv2D(4, 3, padding=0, in_channels=5), gluon.nn.GlobalAvgPool2D())
        net.initialize()
        params = list(net.collect_params().values())
        weights = weights or [rng.randn(*p.shape).astype(np.float32) * 0.5 for p in params]
        for p, w in zip(params, weights, strict=True):
            p.set_data(nd.array(w))
        if hybrid:
            net.hybridize()
        for _ in range(2):  # the second call replays the traced program
            with autograd.record():
                y = net(x)
            y.backward()
        results.append([y.asnumpy()] + [p.grad().asnumpy() for p in params])
    for a, b in zip(*results, strict=True):
        np.testing.assert_array_equal(a, b)
