"""``nd.im2col`` / ``nd.col2im``: sliding windows of N-d (1-d, 2-d, 3-d) maps as columns
and back, as MXNet lays them out: rows are (channel, kernel position), columns are output
positions.

>>> from engine import nd
>>> cols = nd.im2col(nd.ones((1, 2, 4, 4)), kernel=(3, 3))
>>> cols.shape
(1, 18, 4)
>>> float(nd.col2im(cols, output_size=(4, 4), kernel=(3, 3)).asnumpy()[0, 0, 1, 1])
4.0
"""

from __future__ import annotations

import itertools
from typing import Any

from ..base import MXNetShapeError
from .ndarray import NDArray, apply_op


def _geometry(spatial: tuple[int, ...], kernel: Any, stride: Any, dilate: Any, pad: Any):
    n = len(kernel)
    stride = tuple(stride) or (1,) * n
    dilate = tuple(dilate) or (1,) * n
    pad = tuple(pad) or (0,) * n
    out = tuple((spatial[i] + 2 * pad[i] - dilate[i] * (kernel[i] - 1) - 1) // stride[i] + 1
                for i in range(n))
    if min(out) < 1:
        raise MXNetShapeError(f"im2col: dilated kernel {kernel} exceeds padded input {spatial}")
    return tuple(kernel), stride, dilate, pad, out


def _window_slices(offsets: tuple[int, ...], stride: tuple[int, ...], dilate: tuple[int, ...],
                   out: tuple[int, ...]) -> tuple[slice, ...]:
    return tuple(slice(k * d, k * d + s * (o - 1) + 1, s)
                 for k, s, d, o in zip(offsets, stride, dilate, out, strict=True))


def im2col(data: NDArray, kernel: Any, stride: Any = (), dilate: Any = (), pad: Any = (),
           **_: Any) -> NDArray:
    """``(N, C, *spatial)`` -> ``(N, C·prod(kernel), prod(out_spatial))``."""
    xp = data.xp
    x = data._data
    n, c = x.shape[:2]
    kernel, stride, dilate, pad, out = _geometry(x.shape[2:], kernel, stride, dilate, pad)
    padded = xp.pad(x, ((0, 0), (0, 0)) + tuple((p, p) for p in pad))
    positions = list(itertools.product(*(range(k) for k in kernel)))
    windows = [padded[(slice(None), slice(None)) + _window_slices(pos, stride, dilate, out)]
               for pos in positions]
    cols = xp.stack(windows, axis=2).reshape(n, c * len(positions), -1)
    padded_shape = padded.shape

    def backward(g: Any) -> tuple[Any]:
        g = g.reshape((n, c, len(positions)) + out)
        full = xp.zeros(padded_shape, dtype=g.dtype)
        for i, pos in enumerate(positions):
            full[(slice(None), slice(None)) + _window_slices(pos, stride, dilate, out)] += \
                g[:, :, i]
        inner = tuple(slice(p, p + size) for p, size in zip(pad, x.shape[2:], strict=True))
        return (full[(slice(None), slice(None)) + inner],)

    return apply_op(cols, (data,), backward)


def col2im(data: NDArray, output_size: Any, kernel: Any, stride: Any = (), dilate: Any = (),
           pad: Any = (), **_: Any) -> NDArray:
    """Sum columns back into ``(N, C, *output_size)`` maps (the adjoint of im2col)."""
    xp = data.xp
    cols = data._data
    kernel, stride, dilate, pad, out = _geometry(tuple(output_size), kernel, stride, dilate,
                                                 pad)
    positions = list(itertools.product(*(range(k) for k in kernel)))
    n = cols.shape[0]
    c = cols.shape[1] // len(positions)
    shaped = cols.reshape((n, c, len(positions)) + out)
    padded = xp.zeros((n, c) + tuple(s + 2 * p for s, p in zip(output_size, pad, strict=True)),
                      dtype=cols.dtype)
    for i, pos in enumerate(positions):
        padded[(slice(None), slice(None)) + _window_slices(pos, stride, dilate, out)] += \
            shaped[:, :, i]
    inner = tuple(slice(p, p + size) for p, size in zip(pad, output_size, strict=True))
    result = padded[(slice(None), slice(None)) + inner]

    def backward(g: Any) -> tuple[Any]:
        gpad = xp.pad(g, ((0, 0), (0, 0)) + tuple((p, p) for p in pad))
        windows = [gpad[(slice(None), slice(None)) + _window_slices(pos, stride, dilate, out)]
                   for pos in positions]
        return (xp.stack(windows, axis=2).reshape(cols.shape),)

    return apply_op(result, (data,), backward)
