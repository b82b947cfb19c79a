"""The arithmetic of MXNet 1.9.1's ``nd.image`` operators, on numpy HWC arrays.

Each function repeats the float32 operations of MXNet's C++ kernels in the same order, so
results are bit-identical where MXNet is deterministic, including its quirks:

- results are stored by ``static_cast`` after clamping to [0, 255] for uint8, i.e.
  *truncated*, not rounded;
- saturation's "gray" is ``0.114 * blue`` alone (the kernel assigns instead of summing);
- contrast's gray mean is a sequential float32 sum (``cumsum`` keeps that order).
"""

from __future__ import annotations

from functools import lru_cache

import numpy

F32 = numpy.float32
_GRAY = numpy.array([0.299, 0.587, 0.114], F32)
# AlexNet's PCA eigenvectors scaled by their eigenvalues (RGB rows), as MXNet stores them
_EIG = numpy.array([[55.46 * -0.5675, 4.794 * 0.7192, 1.148 * 0.4009],
                    [55.46 * -0.5808, 4.794 * -0.0045, 1.148 * -0.8140],
                    [55.46 * -0.5836, 4.794 * -0.6948, 1.148 * 0.4203]], numpy.float64).astype(F32)


def store(values: numpy.ndarray, dtype: numpy.dtype) -> numpy.ndarray:
    """MXNet's ``saturate_cast``: clamp and truncate for uint8, a plain cast otherwise."""
    if dtype == numpy.uint8:
        return numpy.clip(values, 0, 255).astype(numpy.uint8)
    return values.astype(dtype, copy=False)


def to_tensor(x: numpy.ndarray) -> numpy.ndarray:
    """HWC (or NHWC) in [0, 255] → CHW (NCHW) float32 in [0, 1]."""
    if x.ndim not in (3, 4):
        raise ValueError(f"Input image must have shape (height, width, channels), or "
                         f"(N, height, width, channels) but got {x.shape}")
    out = x.astype(F32) / F32(255.0)
    axes = (2, 0, 1) if x.ndim == 3 else (0, 3, 1, 2)
    return numpy.ascontiguousarray(out.transpose(axes))


def normalize(x: numpy.ndarray, mean: tuple[float, ...], std: tuple[float, ...]) -> numpy.ndarray:
    """``(x - mean[c]) / std[c]`` over CHW (or NCHW) float input."""
    if x.ndim not in (3, 4):
        raise ValueError(f"Input tensor must have shape (channels, height, width), or "
                         f"(N, channels, height, width), but got {x.shape}")
    channels = x.shape[0] if x.ndim == 3 else x.shape[1]
    m, s = _channel_constants(tuple(mean), tuple(std), channels, x.shape)
    dtype = x.dtype if x.dtype.kind == "f" else numpy.dtype(F32)
    if dtype != F32:
        m, s = m.astype(dtype), s.astype(dtype)
    out = numpy.subtract(x, m, dtype=dtype)
    out /= s
    return out


@lru_cache(maxsize=64)
def _channel_constants(mean: tuple[float, ...], std: tuple[float, ...], channels: int,
                       shape: tuple[int, ...]) -> tuple[numpy.ndarray, numpy.ndarray]:
    if channels not in (1, 3):
        raise ValueError(f"The channel dimension must have 1 or 3 elements, but got input with "
                         f"shape {shape}")
    for name, values in (("mean", mean), ("std", std)):
        if len(values) not in (1, channels):
            raise ValueError(f"Invalid {name} for input with shape {shape}. {name} must have "
                             f"either 1 or {channels} elements, but got {tuple(values)}")
    m = numpy.broadcast_to(numpy.asarray(mean, F32), (channels,)).reshape(-1, 1, 1).copy()
    s = numpy.broadcast_to(numpy.asarray(std, F32), (channels,)).reshape(-1, 1, 1).copy()
    return m, s


def _image_check(x: numpy.ndarray) -> None:
    if x.ndim != 3 or x.shape[2] not in (1, 3):
        raise ValueError(f"Input image must have shape (height, width, channels) with 1 or 3 "
                         f"channels, but got {x.shape}")


def brightness(x: numpy.ndarray, alpha: float) -> numpy.ndarray:
    """Scale every value by ``alpha``."""
    _image_check(x)
    return store(x.astype(F32) * F32(alpha), x.dtype)


def contrast(x: numpy.ndarray, alpha: float) -> numpy.ndarray:
    """Blend with the mean gray level: ``x * alpha + (1 - alpha) * mean_gray``."""
    _image_check(x)
    values = x.astype(F32)
    weighted = values * _GRAY if x.shape[2] > 1 else values
    total = numpy.cumsum(weighted.reshape(-1), dtype=F32)[-1] if weighted.size else F32(0)
    gray_mean = F32(total) / F32(x.shape[0] * x.shape[1])
    beta = (F32(1) - F32(alpha)) * gray_mean
    return store(values * F32(alpha) + beta, x.dtype)


def saturation(x: numpy.ndarray, alpha: float) -> numpy.ndarray:
    """Blend each pixel with its "gray" level (MXNet's: 0.114 × blue)."""
    _image_check(x)
    if x.shape[2] == 1:
        return x.copy()
    values = x.astype(F32)
    gray = (values[:, :, 2:3] * _GRAY[2]) * (F32(1) - F32(alpha))
    return store(gray + values * F32(alpha), x.dtype)


def _rgb_to_hls(r: numpy.ndarray, g: numpy.ndarray, b: numpy.ndarray) -> tuple:
    r, g, b = r / F32(255), g / F32(255), b / F32(255)
    vmax = numpy.fmax(numpy.fmax(r, g), b)
    vmin = numpy.fmin(numpy.fmin(r, g), b)
    diff = vmax - vmin
    light = (vmax + vmin) * F32(0.5)
    colored = diff > numpy.finfo(F32).eps
    with numpy.errstate(divide="ignore", invalid="ignore"):
        sat = numpy.where(light < F32(0.5), diff / (vmax + vmin), diff / (F32(2) - vmax - vmin))
        scale = F32(60) / diff
        hue = numpy.where(vmax == r, (g - b) * scale,
                          numpy.where(vmax == g, (b - r) * scale + F32(120),
                                      (r - g) * scale + F32(240)))
    hue = numpy.where(hue < 0, hue + F32(360), hue)
    return (numpy.where(colored, hue, F32(0)).astype(F32), light,
            numpy.where(colored, sat, F32(0)).astype(F32))


# for each sector of the hue circle: which of (p2, p1, falling, rising) is b, g, r
_SECTORS = numpy.array([[1, 3, 0], [1, 0, 2], [3, 0, 1], [0, 2, 1], [0, 1, 3], [2, 1, 0]])


def _hls_to_rgb(hue: numpy.ndarray, light: numpy.ndarray, sat: numpy.ndarray) -> tuple:
    p2 = numpy.where(light <= F32(0.5), light * (F32(1) + sat), light + sat - light * sat)
    p1 = F32(2) * light - p2
    h = hue * F32(1.0 / 60.0)
    while (h < 0).any():
        h = numpy.where(h < 0, h + F32(6), h)
    while (h >= 6).any():
        h = numpy.where(h >= 6, h - F32(6), h)
    sector = h.astype(numpy.int64)
    h = h - sector.astype(F32)
    table = numpy.stack([p2, p1, p1 + (p2 - p1) * (F32(1) - h), p1 + (p2 - p1) * h])
    pick = _SECTORS[sector]  # (..., 3) indices into table
    b, g, r = (numpy.take_along_axis(table, pick[None, ..., k], 0)[0] for k in range(3))
    gray = sat == 0
    r, g, b = (numpy.where(gray, light, c) for c in (r, g, b))
    return r * F32(255), g * F32(255), b * F32(255)


def hue(x: numpy.ndarray, alpha: float) -> numpy.ndarray:
    """Rotate the hue by ``alpha`` turns (through HLS, as MXNet does)."""
    _image_check(x)
    if x.shape[2] == 1:
        return x.copy()
    values = x.astype(F32)
    h, light, sat = _rgb_to_hls(values[:, :, 0], values[:, :, 1], values[:, :, 2])
    h = h + F32(alpha) * F32(360)
    r, g, b = _hls_to_rgb(h, light, sat)
    return store(numpy.stack([r, g, b], axis=2), x.dtype)


def lighting(x: numpy.ndarray, alpha: tuple[float, float, float]) -> numpy.ndarray:
    """AlexNet-style PCA lighting noise with weights ``alpha`` (R, G, B)."""
    _image_check(x)
    if x.shape[2] == 1:
        return x.copy()
    a = numpy.asarray(alpha, F32)
    pca = (_EIG[:, 0] * a[0] + _EIG[:, 1] * a[1]) + _EIG[:, 2] * a[2]
    return store(x.astype(F32) + pca.astype(F32), x.dtype)
