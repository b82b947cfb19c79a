"""The Winograd F(2x2, 3x3) convolution path (engine/ndarray/winograd.py) against the im2col
path and a float64 reference: forward, data gradient, weight gradient and bias gradient.

The thresholds that pick the path per shape (``MIN_HARMONIC_CHANNELS``, ``MIN_TILES``) are lowered
or raised here so that small shapes take the path under test.
"""

import numpy as np
import pytest

from engine import autograd, nd
from engine.ndarray import winograd
from tests.engine.gradcheck import check_grad
from tests.engine.ndarray.winograd_checks import (
    check_channels_last_equals_channels_first,
    check_hybridized_step_is_bit_identical,
    force,
    run_convolution,
)

rng = np.random.RandomState(11)

# (data shape NCHW, filters, pad): odd and even sizes, padding 0, 1 and 2, batch 1
SHAPES = [((1, 3, 5, 5), 2, 0), ((2, 4, 7, 6), 3, 1), ((2, 5, 8, 9), 4, 0),
          ((1, 2, 3, 3), 1, 1), ((3, 17, 11, 12), 8, 2), ((1, 6, 4, 7), 5, 1)]


@pytest.mark.parametrize("shape,filters,pad", SHAPES)
def test_float32_results_match_a_float64_reference_as_closely_as_im2col(monkeypatch, shape,
                                                                          filters, pad):
    x, w, b = rng.randn(*shape), rng.randn(filters, shape[1], 3, 3) * 0.3, rng.randn(filters)
    out_hw = (shape[2] + 2 * pad - 2, shape[3] + 2 * pad - 2)
    gy = rng.randn(shape[0], filters, *out_hw)
    force(monkeypatch, "im2col")
    ref = run_convolution(x, w, b, pad, np.float64, gy)
    im2col = run_convolution(x, w, b, pad, np.float32, gy)
    force(monkeypatch, "F2")
    wino = run_convolution(x, w, b, pad, np.float32, gy)
    assert not np.array_equal(wino[0], im2col[0])  # the other path really ran
    for name, r, i, got in zip(("y", "gx", "gw", "gb"), ref, im2col, wino, strict=True):
        assert got.shape == r.shape and got.dtype == np.float32
        err = np.abs(got - r).max() / np.abs(r).max()
        im2col_err = np.abs(i - r).max() / np.abs(r).max()
        # measured: at most 6e-7 here, the same order as im2col's own float32 error
        assert err < max(4 * im2col_err, 1e-6), (name, err, im2col_err)


@pytest.mark.parametrize("pad", [0, 1])
def test_gradients_are_exact_in_float64(monkeypatch, pad):
    force(monkeypatch, "F2")
    check_grad(lambda x, w, b: nd.Convolution(x, w, b, kernel=(3, 3), pad=(pad, pad),
                                              num_filter=3),
               [rng.randn(2, 4, 5, 6), rng.randn(3, 4, 3, 3), rng.randn(3)])


def test_channels_last_layout_gives_the_channels_first_result(monkeypatch):
    force(monkeypatch, "F2")
    check_channels_last_equals_channels_first(rng, (2, 5, 6, 7))


def test_no_bias_and_input_data_without_gradient(monkeypatch):
    """A network's input needs no data gradient: the weight gradient is still right."""
    force(monkeypatch, "F2")
    x, w = nd.array(rng.randn(2, 4, 6, 6)), nd.array(rng.randn(3, 4, 3, 3))
    w.attach_grad()
    with autograd.record():
        y = nd.Convolution(x, w, kernel=(3, 3), pad=(1, 1), num_filter=3, no_bias=True)
    y.backward()
    force(monkeypatch, "im2col")
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
    assert takes((16, 4, 4, 512), 512)          # 64 tiles: ResNet-18's last stage
    assert takes((32, 2, 2, 256), 256)          # 32 tiles: resnet18_v1's third, CIFAR-sized
    assert not takes((16, 2, 2, 256), 256)      # 16 tiles: filter transforms outweigh
    assert not takes((64, 8, 8, 64), 128, stride=(2, 2))
    assert not takes((64, 8, 8, 64), 128, dilate=(2, 2))
    assert not takes((64, 8, 8, 64), 128, groups=2)
    assert not takes((64, 8, 8, 64), 128, kernel=(3, 2))


def test_hybridized_training_step_is_bit_identical(monkeypatch):
    force(monkeypatch, "F2")
    check_hybridized_step_is_bit_identical(rng, 6)
