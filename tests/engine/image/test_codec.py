"""engine.image decoding: the direct (libjpeg-turbo) JPEG path gives Pillow's general
result; bad bytes fail clearly."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from engine import image
from engine.image import codec
from tests.oracle import needs_mxnet, run_mxnet


def jpeg(pixels, **save):
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", **save)
    return out.getvalue()


def general(buf, flag):
    img = Image.open(io.BytesIO(buf))
    if flag == 0:
        img.draft("L", img.size)
        return np.asarray(img.convert("L"))[:, :, None]
    return np.asarray(img.convert("RGB"))


@pytest.mark.parametrize("save", [{}, {"progressive": True}, {"subsampling": 0},
                                  {"quality": 40, "optimize": True}])
def test_direct_jpeg_decoding_equals_the_general_path(save):
    pixels = np.random.default_rng(0).integers(0, 256, (17, 23, 3), dtype=np.uint8)
    buf = jpeg(pixels, **save)
    for flag in (1, 0):
        assert codec._decode_jpeg_direct(buf, flag) is not None  # the fast path was taken
        np.testing.assert_array_equal(image.decode(buf, flag), general(buf, flag))


def test_gray_and_png_files_take_the_general_path():
    gray = np.arange(48, dtype=np.uint8).reshape(6, 8)
    buf = jpeg(gray)
    assert image.decode(buf, 1).shape == (6, 8, 3)
    assert image.decode(buf, -1).shape == (6, 8, 1)
    png = image.imencode(np.dstack([gray] * 3), ".png")
    np.testing.assert_array_equal(image.decode(png)[:, :, 0], gray)


def test_truncated_or_foreign_bytes_raise_image_decode_error():
    buf = jpeg(np.zeros((8, 8, 3), np.uint8))
    with pytest.raises(image.ImageDecodeError):
        image.decode(buf[:40])
    # cut inside the scan data: libjpeg only warns, and the half image must not pass as whole
    assert codec._decode_jpeg_direct(buf[:-30], 1) is None
    with pytest.raises(image.ImageDecodeError):
        image.decode(buf[:-30])
    with pytest.raises(image.ImageDecodeError, match="cannot decode image"):
        image.decode(b"GIF89a nonsense")


@needs_mxnet
def test_colour_jpegs_decode_to_mxnets_exact_pixels():
    rng = np.random.default_rng(1)
    smooth = np.add.outer(np.arange(32) * 5, np.arange(32) * 3)[:, :, None] * [1, 2, 3] % 256
    noisy = np.clip(smooth + rng.integers(-40, 40, (32, 32, 3)), 0, 255).astype(np.uint8)
    buffers = [jpeg(noisy, quality=90), jpeg(noisy, progressive=True),
               jpeg(noisy, subsampling=0), jpeg(rng.integers(0, 256, (17, 23, 3), np.uint8))]
    run = run_mxnet(
        "for i, buf in enumerate(inputs[k] for k in sorted(inputs)):\n"
        "    outputs['rgb%d' % i] = mx.image.imdecode(buf.tobytes(), flag=1)\n"
        "    outputs['gray%d' % i] = mx.image.imdecode(buf.tobytes(), flag=0)\n",
        {f"b{i}": np.frombuffer(buf, np.uint8) for i, buf in enumerate(buffers)})
    for i, buf in enumerate(buffers):
        np.testing.assert_array_equal(image.decode(buf, 1), run[f"rgb{i}"])
        np.testing.assert_array_equal(image.decode(buf, 0), run[f"gray{i}"])
