"""Spatial-transformer operators: ``GridGenerator``, ``BilinearSampler`` and
``SpatialTransformer`` (Jaderberg et al. 2015), differentiable in data, grid and transform;
and ``ROIPooling`` (Fast R-CNN's region max-pooling).

Grids hold normalised coordinates: x (channel 0) and y (channel 1) in [-1, 1] span the
input's width and height; samples outside the input read zeros.

>>> from engine import nd
>>> identity = nd.array([[1, 0, 0, 0, 1, 0]])
>>> image = nd.arange(6).reshape((1, 1, 2, 3))
>>> nd.SpatialTransformer(image, identity, target_shape=(2, 3)).asnumpy().ravel().tolist()
[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
"""

from __future__ import annotations

from typing import Any

import numpy

from ..base import MXNetError
from .ndarray import NDArray, apply_op, as_raw
from .ops import batch_dot
from .shape_ops import reshape


def _constant(values: numpy.ndarray, like: NDArray) -> NDArray:
    return NDArray(like.xp.asarray(values.astype(like._data.dtype)), like.context)


def grid_generator(data: NDArray, transform_type: str = "affine", target_shape: Any = (0, 0),
                   **_: Any) -> NDArray:
    """A sampling grid (N, 2, H, W): from affine parameters (N, 6) or from a flow field
    (N, 2, H, W) added to each pixel's own position."""
    if transform_type == "affine":
        h, w = (int(v) for v in target_shape)
        ys, xs = numpy.meshgrid(numpy.linspace(-1, 1, h), numpy.linspace(-1, 1, w),
                                indexing="ij")
        base = numpy.stack([xs.ravel(), ys.ravel(), numpy.ones(h * w)])  # (3, H·W)
        n = data.shape[0]
        theta = reshape(data, (n, 2, 3))
        points = _constant(numpy.broadcast_to(base, (n, 3, h * w)).copy(), data)
        return reshape(batch_dot(theta, points), (n, 2, h, w))
    if transform_type == "warp":
        n, _, h, w = data.shape
        ys, xs = numpy.meshgrid(numpy.arange(h), numpy.arange(w), indexing="ij")
        pixels = _constant(numpy.stack([xs, ys])[None], data)
        scale = _constant(numpy.array([2.0 / max(w - 1, 1), 2.0 / max(h - 1, 1)])
                          .reshape(1, 2, 1, 1), data)
        return (data + pixels) * scale - 1
    raise MXNetError(f"GridGenerator: transform_type must be affine or warp: {transform_type!r}")


def bilinear_sampler(data: NDArray, grid: NDArray, cudnn_off: Any = None,
                     **_: Any) -> NDArray:
    """Sample ``data`` (N, C, H, W) bilinearly at ``grid`` (N, 2, Ho, Wo)."""
    xp = data.xp
    x = data._data
    n, c, h, w = x.shape
    gx = (as_raw(grid)[:, 0] + 1) * (w - 1) / 2  # source column, (N, Ho, Wo)
    gy = (as_raw(grid)[:, 1] + 1) * (h - 1) / 2
    x0, y0 = xp.floor(gx).astype(numpy.int64), xp.floor(gy).astype(numpy.int64)
    fx, fy = (gx - x0).astype(x.dtype), (gy - y0).astype(x.dtype)
    batch = xp.arange(n).reshape(n, 1, 1)
    corners = []  # (row, col, weight, d weight/d gx, d weight/d gy)
    for dy, dx in ((0, 0), (0, 1), (1, 0), (1, 1)):
        wx = fx if dx else 1 - fx
        wy = fy if dy else 1 - fy
        corners.append((y0 + dy, x0 + dx, wx * wy, (1 if dx else -1) * wy,
                        (1 if dy else -1) * wx))
    out = xp.zeros((n, c) + gx.shape[1:], dtype=x.dtype)
    reads = []
    for row, col, weight, _, _ in corners:
        valid = (row >= 0) & (row < h) & (col >= 0) & (col < w)
        r, cc = xp.clip(row, 0, h - 1), xp.clip(col, 0, w - 1)
        value = x[batch, :, r, cc] * valid[..., None]  # (N, Ho, Wo, C)
        value = xp.moveaxis(value, -1, 1)
        reads.append((r, cc, valid, value))
        out += value * weight[:, None]

    def backward(g: Any) -> tuple[Any, Any]:
        gdata = xp.zeros_like(x)
        ggx = xp.zeros(gx.shape, dtype=x.dtype)
        ggy = xp.zeros(gy.shape, dtype=x.dtype)
        for (r, cc, valid, value), (_, _, weight, dwx, dwy) in zip(reads, corners,
                                                                      strict=True):
            contribution = g * (weight * valid)[:, None]  # (N, C, Ho, Wo)
            xp.add.at(gdata, (batch, slice(None), r, cc), xp.moveaxis(contribution, 1, -1))
            seen = (g * value).sum(axis=1)
            ggx += seen * dwx
            ggy += seen * dwy
        ggrid = xp.stack([ggx * (w - 1) / 2, ggy * (h - 1) / 2], axis=1)
        return gdata, ggrid.astype(as_raw(grid).dtype)

    return apply_op(out, (data, grid), backward)


def spatial_transformer(data: NDArray, loc: NDArray, target_shape: Any = (0, 0),
                        transform_type: str = "affine", sampler_type: str = "bilinear",
                        cudnn_off: Any = None, **_: Any) -> NDArray:
    """Warp ``data`` by the affine transforms ``loc`` (N, 6) onto ``target_shape``."""
    if transform_type != "affine" or sampler_type != "bilinear":
        raise MXNetError("SpatialTransformer supports affine transforms with bilinear sampling")
    return bilinear_sampler(data, grid_generator(loc, "affine", target_shape))


def _round_half_away(v: float) -> int:
    return int(numpy.sign(v) * numpy.floor(abs(v) + 0.5))


def roi_pooling(data: NDArray, rois: NDArray, pooled_size: Any, spatial_scale: float,
                **_: Any) -> NDArray:
    """Max-pool each region ``[batch, x1, y1, x2, y2]`` of ``rois`` (in input coordinates ×
    ``spatial_scale``) into a ``pooled_size`` grid; the gradient goes to each bin's maximum."""
    xp = data.xp
    x = data._data
    boxes = rois.asnumpy().astype(numpy.float64)  # a few boxes: looped on the host
    ph_n, pw_n = (int(v) for v in pooled_size)
    n_batch, channels, height, width = x.shape
    out = xp.zeros((len(boxes), channels, ph_n, pw_n), dtype=x.dtype)
    winners: list[tuple[int, int, int, Any]] = []  # (roi, ph, pw, flat argmax per channel)
    dtype = x.dtype.type
    for r, (b, x1, y1, x2, y2) in enumerate(boxes):
        b = int(b)
        if b < 0 or b >= n_batch:
            continue
        start_w, start_h = (_round_half_away(v * spatial_scale) for v in (x1, y1))
        end_w, end_h = (_round_half_away(v * spatial_scale) for v in (x2, y2))
        bin_h = dtype(max(end_h - start_h + 1, 1)) / dtype(ph_n)
        bin_w = dtype(max(end_w - start_w + 1, 1)) / dtype(pw_n)
        for ph in range(ph_n):
            h0 = min(max(int(numpy.floor(dtype(ph) * bin_h)) + start_h, 0), height)
            h1 = min(max(int(numpy.ceil(dtype(ph + 1) * bin_h)) + start_h, 0), height)
            for pw in range(pw_n):
                w0 = min(max(int(numpy.floor(dtype(pw) * bin_w)) + start_w, 0), width)
                w1 = min(max(int(numpy.ceil(dtype(pw + 1) * bin_w)) + start_w, 0), width)
                if h1 <= h0 or w1 <= w0:
                    continue
                region = x[b, :, h0:h1, w0:w1].reshape(channels, -1)
                best = region.argmax(axis=1)
                out[r, :, ph, pw] = region[xp.arange(channels), best]
                rows, cols = best // (w1 - w0) + h0, best % (w1 - w0) + w0
                winners.append((r, ph, pw, (b, rows, cols)))

    def backward(g: Any) -> tuple[Any, None]:
        gdata = xp.zeros_like(x)
        for r, ph, pw, (b, rows, cols) in winners:
            xp.add.at(gdata, (b, xp.arange(channels), rows, cols), g[r, :, ph, pw])
        return gdata, None

    return apply_op(out, (data, rois), backward)




def correlation(data1: NDArray, data2: NDArray, kernel_size: int = 1,
                max_displacement: int = 1, stride1: int = 1, stride2: int = 1,
                pad_size: int = 0, is_multiply: bool = True, **_: Any) -> NDArray:
    """FlowNet's correlation layer: for each displacement within ``max_displacement``, the
    mean over a ``kernel_size`` window and all channels of ``data1·data2`` (or
    ``|data1 − data2|``). Built from slices, so both inputs get gradients."""
    from .ops import reduce_sum, unary
    from .shape_ops import getitem, stack
    from .slice_ops import pad

    n, c, h, w = data1.shape
    widths = (0, 0, 0, 0, pad_size, pad_size, pad_size, pad_size)
    a = pad(data1, mode="constant", pad_width=widths)
    b = pad(data2, mode="constant", pad_width=widths)
    border = max_displacement + (kernel_size - 1) // 2
    top_h = int(numpy.ceil((h + 2 * pad_size - 2 * border) / stride1))
    top_w = int(numpy.ceil((w + 2 * pad_size - 2 * border) / stride1))
    if top_h < 1 or top_w < 1:
        raise MXNetError("Correlation: the displacement and kernel exceed the padded input")
    radius = max_displacement // stride2
    span_h, span_w = stride1 * (top_h - 1) + 1, stride1 * (top_w - 1) + 1

    def window(x: NDArray, top: int, left: int) -> NDArray:
        return getitem(x, (slice(None), slice(None), slice(top, top + span_h, stride1),
                           slice(left, left + span_w, stride1)))

    channels = []
    for p in range(-radius, radius + 1):
        for o in range(-radius, radius + 1):
            total = None
            for kh in range(kernel_size):
                for kw in range(kernel_size):
                    y1, x1 = max_displacement + kh, max_displacement + kw
                    f1 = window(a, y1, x1)
                    f2 = window(b, y1 + p * stride2, x1 + o * stride2)
                    term = f1 * f2 if is_multiply else unary("abs", f1 - f2)
                    part = reduce_sum(term, axis=1)
                    total = part if total is None else total + part
            channels.append(total / (kernel_size * kernel_size * c))
    return stack(*channels, axis=1)
