"""The Winograd F(4x4, 3x3) convolution path (engine/ndarray/winograd4.py) against the im2col
path in float64 (exact to rounding) and a float64 reference in float32 (bounded error):
forward, data gradient, weight gradient and bias gradient, on sizes that leave partial tiles
and with padding 0, 1 and 2.

The thresholds that pick the path per shape are lowered or raised here so that small shapes
take the path under test.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from engine import nd
from engine.ndarray import cpu_kernels, winograd4
from tests.engine.gradcheck import check_grad
from tests.engine.ndarray.winograd_checks import (
    check_channels_last_equals_channels_first,
    check_hybridized_step_is_bit_identical,
    force,
    run_convolution,
)

pytestmark = pytest.mark.skipif(not cpu_kernels.ENABLED, reason="numba is not installed")

rng = np.random.RandomState(5)

# (data shape NCHW, filters, pad): sizes whose outputs are not multiples of 4 (a partial last
# tile), padding 0, 1 and 2, batch 1, one channel, and a CNN-like 32-channel layer; for the
# transforms' blocks of rows of tiles (winograd4.BLOCK_TILES): blocks that span images, a
# short last block (3 images of 2 rows in blocks of 4 rows), one row wider than a block
SHAPES = [((1, 3, 5, 5), 2, 0), ((2, 4, 7, 6), 3, 1), ((2, 5, 8, 9), 4, 0),
          ((1, 2, 3, 3), 1, 1), ((3, 17, 11, 12), 8, 2), ((1, 6, 4, 7), 5, 1),
          ((1, 1, 6, 6), 1, 0), ((2, 32, 12, 12), 64, 1), ((3, 3, 6, 5), 2, 1),
          ((1, 2, 5, 38), 3, 1)]


def _case(shape, filters, pad):
    x, w, b = rng.randn(*shape), rng.randn(filters, shape[1], 3, 3) * 0.3, rng.randn(filters)
    out_hw = (shape[2] + 2 * pad - 2, shape[3] + 2 * pad - 2)
    return x, w, b, rng.randn(shape[0], filters, *out_hw)


# F(4x4) runs a layer whole, or by blocks of images (winograd4.image_blocks): both, forced
PATHS = ["F4", "F4-blocks"]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("shape,filters,pad", SHAPES)
def test_float64_equals_im2col(monkeypatch, shape, filters, pad, path):
    x, w, b, gy = _case(shape, filters, pad)
    force(monkeypatch, "im2col")
    ref = run_convolution(x, w, b, pad, np.float64, gy)
    force(monkeypatch, path)
    got = run_convolution(x, w, b, pad, np.float64, gy)
    for name, r, g in zip(("y", "gx", "gw", "gb"), ref, got, strict=True):
        assert g.shape == r.shape, name
        np.testing.assert_allclose(g, r, rtol=1e-11, atol=1e-11 * np.abs(r).max(), err_msg=name)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("shape,filters,pad", SHAPES)
def test_float32_error_is_bounded(monkeypatch, shape, filters, pad, path):
    """F(4x4)'s transforms (entries up to 8, and 1/24 in G) round more than F(2x2)'s: its
    float32 error, relative to each result's largest magnitude, stays under 2e-5 (measured
    here: at most about 6e-6; F(2x2) about 4e-7, im2col about 2e-7)."""
    x, w, b, gy = _case(shape, filters, pad)
    force(monkeypatch, "im2col")
    ref = run_convolution(x, w, b, pad, np.float64, gy)
    force(monkeypatch, path)
    got = run_convolution(x, w, b, pad, np.float32, gy)
    force(monkeypatch, "F2")
    f2 = run_convolution(x, w, b, pad, np.float32, gy)
    assert not np.array_equal(got[0], f2[0])  # the other path really ran
    for name, r, g in zip(("y", "gx", "gw", "gb"), ref, got, strict=True):
        assert g.dtype == np.float32
        assert np.abs(g - r).max() / np.abs(r).max() < 2e-5, name


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("pad", [0, 1])
def test_gradients_are_exact_in_float64(monkeypatch, pad, path):
    force(monkeypatch, path)
    check_grad(lambda x, w, b: nd.Convolution(x, w, b, kernel=(3, 3), pad=(pad, pad),
                                              num_filter=3),
               [rng.randn(2, 4, 7, 6), rng.randn(3, 4, 3, 3), rng.randn(3)])


@pytest.mark.parametrize("path", PATHS)
def test_channels_last_layout_gives_the_channels_first_result(monkeypatch, path):
    force(monkeypatch, path)
    check_channels_last_equals_channels_first(rng, (2, 5, 9, 7))


def test_path_choice():
    """F(4x4) takes the Winograd convolutions with enough 6x6 tiles; fewer keep F(2x2)."""
    f32 = np.float32
    assert winograd4.applies(np.empty((64, 16, 16, 32), f32), np.empty((64, 288), f32), (1, 1))
    assert winograd4.applies(np.empty((16, 8, 8, 256), f32), np.empty((256, 2304), f32),
                             (1, 1))  # 64 tiles
    assert not winograd4.applies(np.empty((4, 8, 8, 256), f32), np.empty((256, 2304), f32),
                                 (1, 1))  # 16 tiles
    assert not winograd4.applies(np.empty((64, 16, 16, 32), np.float16),
                                 np.empty((64, 288), np.float16), (1, 1))
    assert winograd4.tile_count((2, 7, 6, 3), (1, 1)) == 2 * 2 * 2


@pytest.mark.parametrize("path", PATHS)
def test_hybridized_training_step_is_bit_identical(monkeypatch, path):
    force(monkeypatch, path)
    check_hybridized_step_is_bit_identical(rng, 9)


def test_image_blocks_cover_the_batch_by_the_shapes_alone():
    """Blocks of whole images whose transform domain is near BLOCK_BYTES, in order and
    covering the batch; None (the layer whole) where too few tiles or images make them."""
    cnn = winograd4.Plan((64, 16, 16, 32), 64, (1, 1))  # issue 11's CNN, 16 tiles an image
    blocks = winograd4.image_blocks(cnn, 4)
    assert blocks == [(n, n + 4) for n in range(0, 64, 4)]  # 4 images: 884 KiB
    assert winograd4.image_blocks(winograd4.Plan((64, 8, 8, 64), 128, (1, 1)), 4) \
        == [(n, n + 8) for n in range(0, 64, 8)]  # 9 fit, 8 for 8 blocks (and 32 tiles)
    assert winograd4.image_blocks(cnn, 8) == [(n, n + 2) for n in range(0, 64, 2)]
    ragged = winograd4.image_blocks(winograd4.Plan((15, 16, 16, 32), 64, (1, 1)), 4)
    assert ragged == [(n, min(15, n + 2)) for n in range(0, 15, 2)]  # 32 tiles a block
    # one image's domain over 2x BLOCK_BYTES, 32 tiles over 2x, or fewer than 8 blocks
    assert winograd4.image_blocks(winograd4.Plan((16, 64, 64, 64), 64, (1, 1)), 4) is None
    assert winograd4.image_blocks(winograd4.Plan((64, 8, 8, 256), 256, (1, 1)), 4) is None
    assert winograd4.image_blocks(winograd4.Plan((14, 16, 16, 32), 64, (1, 1)), 4) is None
    assert winograd4.image_blocks(winograd4.Plan((32, 8, 8, 64), 64, (1, 1)), 4) is None


def test_forced_blocks_really_run(monkeypatch):
    """The "F4-blocks" tests above take the blocked path (forward and data gradient)."""
    force(monkeypatch, "F4-blocks")
    seen = []
    for name in ("_forward_block", "_data_gradient_block"):
        original = getattr(winograd4, name)
        monkeypatch.setattr(winograd4, name, lambda *a, _f=original, _n=name: (
            seen.append((_n, a[-2], a[-1])), _f(*a))[1])
    x, w, b, gy = _case((3, 4, 7, 6), 3, 1)
    run_convolution(x, w, b, 1, np.float32, gy)
    assert seen == [("_forward_block", n, n + 1) for n in range(3)] + \
        [("_data_gradient_block", n, n + 1) for n in range(3)]


@pytest.mark.parametrize("setting,expected", [("4x4", "F4"), ("2x2", "F2"), ("off", "im2col"),
                                              ("bogus", "error")])
def test_winograd_setting_picks_the_algorithms(setting, expected):
    """RUDDER_ENGINE_WINOGRAD, read when the engine is imported (a fresh process)."""
    probe = ("from engine.ndarray import winograd, winograd4; import numpy as np; "
             "x = np.empty((64, 16, 16, 32), np.float32); w = np.empty((64, 288), np.float32); "
             "w2 = winograd.applies(np, (3, 3), (1, 1), (1, 1), 1, x.shape, 64, (1, 1)); "
             "print('F4' if w2 and winograd4.applies(x, w, (1, 1)) else 'F2' if w2 "
             "else 'im2col')")
    env = {**os.environ, "RUDDER_ENGINE_WINOGRAD": setting}
    run = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                         text=True, timeout=120)
    if expected == "error":
        assert run.returncode != 0 and "RUDDER_ENGINE_WINOGRAD='bogus'" in run.stderr
    else:
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == expected
