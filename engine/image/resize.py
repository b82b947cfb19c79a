"""OpenCV's ``cv::resize`` in numpy, as separable weight matrices (one per axis).

Interpolation codes are OpenCV's (and MXNet's): 0 nearest, 1 bilinear, 2 bicubic,
3 area, 4 Lanczos. Pixel centres are aligned the way OpenCV aligns them
(``x_src = (x_dst + 0.5) * scale - 0.5``) and borders replicate. OpenCV computes uint8
bilinear/bicubic in fixed point, so results may differ from it by 1 in the last bit.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy


def _cubic(x: numpy.ndarray) -> numpy.ndarray:
    a = -0.75  # OpenCV's bicubic constant
    x = numpy.abs(x)
    return numpy.where(
        x <= 1, ((a + 2) * x - (a + 3)) * x * x + 1,
        numpy.where(x < 2, ((a * x - 5 * a) * x + 8 * a) * x - 4 * a, 0.0))


def _lanczos4(x: numpy.ndarray) -> numpy.ndarray:
    with numpy.errstate(divide="ignore", invalid="ignore"):
        y = numpy.sinc(x) * numpy.sinc(x / 4)
    return numpy.where(numpy.abs(x) < 4, y, 0.0)


def _interp_taps(src: int, dst: int, taps: int, kernel: str) -> numpy.ndarray:
    scale = src / dst
    matrix = numpy.zeros((dst, src), numpy.float64)
    for d in range(dst):
        f = (d + 0.5) * scale - 0.5
        s = math.floor(f)
        frac = f - s
        if kernel == "linear":
            offsets = numpy.array([0, 1])
            weights = numpy.array([1 - frac, frac])
        else:
            half = taps // 2
            offsets = numpy.arange(-half + 1, half + 1)
            fn = _cubic if kernel == "cubic" else _lanczos4
            weights = fn(offsets - frac)
            weights = weights / weights.sum()
        for off, w in zip(offsets, weights, strict=True):
            matrix[d, min(max(s + off, 0), src - 1)] += w
    return matrix


def _area_taps(src: int, dst: int) -> numpy.ndarray:
    scale = src / dst
    matrix = numpy.zeros((dst, src), numpy.float64)
    if scale >= 1:  # shrinking: each output averages the source pixels it covers
        for d in range(dst):
            start, end = d * scale, (d + 1) * scale
            for s in range(math.floor(start), min(math.ceil(end), src)):
                overlap = min(end, s + 1) - max(start, s)
                if overlap > 1e-12:
                    matrix[d, s] = overlap / scale
        return matrix
    for d in range(dst):  # enlarging: OpenCV's linear rule with area-shaped fractions
        s = math.floor(d * scale)
        frac = (d + 1) - (s + 1) / scale
        frac = 0.0 if frac <= 0 else frac - math.floor(frac)
        matrix[d, min(max(s, 0), src - 1)] += 1 - frac
        matrix[d, min(max(s + 1, 0), src - 1)] += frac
    return matrix


@lru_cache(maxsize=256)
def axis_weights(src: int, dst: int, interp: int) -> numpy.ndarray:
    """The (dst, src) float32 matrix that resamples one axis."""
    if interp == 0:
        matrix = numpy.zeros((dst, src), numpy.float32)
        index = numpy.minimum(numpy.floor(numpy.arange(dst) * (src / dst)).astype(int), src - 1)
        matrix[numpy.arange(dst), index] = 1
        return matrix
    if interp == 1:
        return _interp_taps(src, dst, 2, "linear").astype(numpy.float32)
    if interp == 2:
        return _interp_taps(src, dst, 4, "cubic").astype(numpy.float32)
    if interp == 3:
        return _area_taps(src, dst).astype(numpy.float32)
    if interp == 4:
        return _interp_taps(src, dst, 8, "lanczos").astype(numpy.float32)
    raise ValueError(f"Unknown interp method {interp}")


def resize(img: numpy.ndarray, width: int, height: int, interp: int = 1) -> numpy.ndarray:
    """Resize an HWC (or HW) image to (height, width); uint8 in, uint8 out (rounded and
    saturated like OpenCV); float in, float32 out."""
    if width <= 0 or height <= 0:
        raise ValueError(f"resize to {width}x{height}: sizes must be positive")
    src = numpy.asarray(img)
    squeeze = src.ndim == 2
    if squeeze:
        src = src[:, :, None]
    h, w = src.shape[:2]
    if interp == 3 and h % height == 0 and w % width == 0 and (h > height or w > width):
        out = src.reshape(height, h // height, width, w // width, -1).mean(
            axis=(1, 3), dtype=numpy.float32)  # integer shrink: OpenCV's exact box average
    elif interp == 0:
        rows = axis_weights(h, height, 0).argmax(axis=1)
        cols = axis_weights(w, width, 0).argmax(axis=1)
        out = src[rows][:, cols]
        return out[:, :, 0] if squeeze else out
    else:
        data = src.astype(numpy.float32, copy=False)
        wy, wx = axis_weights(h, height, interp), axis_weights(w, width, interp)
        out = numpy.einsum("yh,hwc->ywc", wy, data, optimize=True)
        out = numpy.einsum("xw,ywc->yxc", wx, out, optimize=True)
    if src.dtype == numpy.uint8:
        out = numpy.clip(numpy.rint(out), 0, 255).astype(numpy.uint8)
    else:
        out = out.astype(numpy.float32, copy=False)
    return out[:, :, 0] if squeeze else out
