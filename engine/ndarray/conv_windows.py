"""Window views and their scatter-back, shared by convolution, deconvolution and pooling.

Every op here works on a *channels-last view* of its data, shape (N, *spatial, C): for the
channels-first layouts (NCW/NCHW/NCDHW) that view is a free transpose. The GEMMs then read
and write (rows, channels) matrices whose channels are contiguous, and an op's output is
returned as a transposed view of a channels-last array, so the next layer's window view
(``as_strided``, no copy) reads runs of contiguous channels. ``im2col`` is one copy of that
window view; ``col2im_add`` scatters gradients back with one strided add per kernel offset.

>>> import numpy as np
>>> x = np.arange(16.0).reshape(1, 4, 4, 1)
>>> windows(np, x, (2, 2), (3, 3), (1, 1), (1, 1)).shape   # (N, OH, OW, KH, KW, C)
(1, 2, 2, 3, 3, 1)
"""

from __future__ import annotations

import itertools
import math
from typing import Any

CHANNELS_FIRST = {1: "NCW", 2: "NCHW", 3: "NCDHW"}
CHANNELS_LAST = {1: "NWC", 2: "NHWC", 3: "NDHWC"}


def spatial_tuple(value: Any, ndim: int, name: str, default: int | None = None) -> tuple[int, ...]:
    """An MXNet shape argument (int, tuple, or empty for the default) as ``ndim`` ints."""
    if value is None or value == ():
        if default is None:
            raise ValueError(f"{name} must be given")
        return (default,) * ndim
    if isinstance(value, int):
        return (int(value),) * ndim
    value = tuple(int(v) for v in value)
    if len(value) == 1 and ndim > 1:
        return value * ndim
    if len(value) != ndim:
        raise ValueError(f"{name} must have {ndim} entries for a {ndim}-D op, got {value}")
    return value


def check_layout(layout: str | None, ndim: int, op: str) -> bool:
    """Validate ``layout`` for ``ndim`` spatial dims; True when channels come last."""
    if layout is None or layout == CHANNELS_FIRST[ndim]:
        return False
    if layout == CHANNELS_LAST[ndim]:
        return True
    raise ValueError(f"{op}: layout {layout!r} does not fit {ndim + 2}-D data; expected "
                     f"{CHANNELS_FIRST[ndim]!r} or {CHANNELS_LAST[ndim]!r}")


def to_channels_last(x: Any, channels_last: bool) -> Any:
    """(N, C, *S) → (N, *S, C) as a view; identity when already channels-last."""
    if channels_last:
        return x
    return x.transpose(0, *range(2, x.ndim), 1)


def from_channels_last(x: Any, channels_last: bool) -> Any:
    """(N, *S, C) → the op's layout, as a view."""
    if channels_last:
        return x
    return x.transpose(0, x.ndim - 1, *range(1, x.ndim - 1))


def pad_channels_last(xp: Any, xl: Any, before: tuple[int, ...], after: tuple[int, ...],
                      value: float = 0.0) -> Any:
    """A contiguous channels-last copy of ``xl`` with ``before``/``after`` cells per spatial
    dim filled with ``value`` (``xl`` itself when there is nothing to pad)."""
    if not any(before) and not any(after):
        return xl
    shape = (xl.shape[0], *(s + b + a for s, b, a in zip(xl.shape[1:-1], before, after,
                                                           strict=True)), xl.shape[-1])
    out = xp.full(shape, value, dtype=xl.dtype)
    out[interior(before, xl.shape[1:-1])] = xl
    return out


def interior(before: tuple[int, ...], sizes: tuple[int, ...]) -> tuple[slice, ...]:
    """Index of the unpadded region inside a padded channels-last array."""
    return (slice(None), *(slice(b, b + s) for b, s in zip(before, sizes, strict=True)),
            slice(None))


def windows(xp: Any, xpad: Any, out_sizes: tuple[int, ...], kernel: tuple[int, ...],
            stride: tuple[int, ...], dilate: tuple[int, ...]) -> Any:
    """A read-only view (N, *out, *kernel, C) of the windows of a channels-last array."""
    s_n, *s_sp, s_c = xpad.strides
    shape = (xpad.shape[0], *out_sizes, *kernel, xpad.shape[-1])
    strides = (s_n, *(s * st for s, st in zip(s_sp, stride, strict=True)),
               *(s * d for s, d in zip(s_sp, dilate, strict=True)), s_c)
    return xp.lib.stride_tricks.as_strided(xpad, shape=shape, strides=strides)


def offset_slices(offset: tuple[int, ...], out_sizes: tuple[int, ...],
                  stride: tuple[int, ...], dilate: tuple[int, ...]) -> tuple[slice, ...]:
    """Index (channels-last) of the input cells that kernel position ``offset`` reads."""
    spans = (slice(k * d, k * d + s * (o - 1) + 1, s)
             for k, o, s, d in zip(offset, out_sizes, stride, dilate, strict=True))
    return (slice(None), *spans, slice(None))


def kernel_offsets(kernel: tuple[int, ...]) -> list[tuple[int, ...]]:
    return list(itertools.product(*(range(k) for k in kernel)))


def col2im_add(gpad: Any, gcols: Any, out_sizes: tuple[int, ...], kernel: tuple[int, ...],
               stride: tuple[int, ...], dilate: tuple[int, ...]) -> None:
    """Add window values ``gcols`` (KK, N, *out, C), kernel-position-major, back into the
    channels-last ``gpad`` they were read from: one strided add per kernel position, each
    from a contiguous block (2.5x faster than reading (N, *out, *kernel, C) column slices)."""
    for k, offset in enumerate(kernel_offsets(kernel)):
        gpad[offset_slices(offset, out_sizes, stride, dilate)] += gcols[k]


def conv_out_size(size: int, kernel: int, stride: int, pad: int, dilate: int) -> int:
    return (size + 2 * pad - dilate * (kernel - 1) - 1) // stride + 1


def count(values: tuple[int, ...]) -> int:
    return math.prod(values)
