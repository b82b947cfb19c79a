"""N-d max/avg/sum pooling (MXNet's ``Pooling``): 1-D, 2-D, 3-D, channels-first or -last.

Pooling runs as one elementwise pass per kernel position over strided slices of the
(padded) channels-last input: a 2x2 max-pool is three ``maximum`` calls, not a reduction
over a copied window array. Max-pooling stores the argmax (the kernel position of the first
maximum, as MXNet's backward picks it) so its backward is one masked add per position.

>>> from engine import nd
>>> x = nd.arange(16).reshape((1, 1, 4, 4))
>>> nd.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max").asnumpy()[0, 0].tolist()
[[5.0, 7.0], [13.0, 15.0]]
>>> nd.Pooling(x, pool_type="avg", global_pool=True).shape
(1, 1, 1, 1)
"""

from __future__ import annotations

import math
from typing import Any

import numpy

from . import conv_windows, cpu_kernels
from .ndarray import NDArray, apply_op


def _pool_out(size: int, k: int, s: int, p: int, convention: str) -> int:
    if convention == "same":
        return math.ceil(size / s)
    span = size + 2 * p - k
    return (math.ceil(span / s) if convention == "full" else span // s) + 1


def _window_counts(xp: Any, out_sizes: tuple[int, ...], kernel: tuple[int, ...],
                   stride: tuple[int, ...], lo: tuple[int, ...], hi: tuple[int, ...],
                   dtype: Any) -> Any:
    """Cells of each window inside [lo, hi) per dim (padded coordinates), multiplied over the
    dims (a window is a box, so its count is separable), shaped (1, *out, 1)."""
    total = None
    for axis, (o, k, s, a, b) in enumerate(zip(out_sizes, kernel, stride, lo, hi, strict=True)):
        start = numpy.arange(o) * s
        per_dim = numpy.minimum(start + k, b) - numpy.maximum(start, a)
        shape = [1] * (len(out_sizes) + 2)
        shape[axis + 1] = o
        per_dim = per_dim.reshape(shape)
        total = per_dim if total is None else total * per_dim
    return xp.asarray(total.astype(dtype))  # type: ignore[union-attr]


def pooling(data: NDArray, kernel: Any = (), pool_type: str = "max", global_pool: bool = False,
            cudnn_off: bool = False, pooling_convention: str = "valid", stride: Any = (),
            pad: Any = (), p_value: Any = None, count_include_pad: bool | None = None,
            layout: str | None = None, **_: Any) -> NDArray:
    """Max, average or sum pooling over the spatial dims of ``data`` (MXNet's arguments).

    ``stride`` defaults to 1 and ``pad`` to 0 as in MXNet's operator (Gluon's pooling layers
    pass ``strides=pool_size``); ``pooling_convention='full'`` rounds the output size up
    (Gluon's ``ceil_mode``); ``count_include_pad`` (default True) counts the padding in an
    average; ``global_pool`` pools each whole channel to size 1.
    """
    x = data._data
    xp = data.xp
    nd = x.ndim - 2
    if nd not in (1, 2, 3):
        raise ValueError(f"Pooling expects 3-, 4- or 5-D data, got shape {x.shape}")
    last = conv_windows.check_layout(layout, nd, "Pooling")
    if pool_type not in ("max", "avg", "sum"):
        raise ValueError(f"Pooling: pool_type {pool_type!r} is not supported; expected "
                         f"'max', 'avg' or 'sum'")
    if pooling_convention not in ("valid", "full", "same"):
        raise ValueError(f"Pooling: pooling_convention must be 'valid', 'full' or 'same', "
                         f"got {pooling_convention!r}")
    xl = conv_windows.to_channels_last(x, last)
    if global_pool:
        return _global_pool(data, xl, pool_type, last)
    kernel = conv_windows.spatial_tuple(kernel, nd, "kernel")
    stride = conv_windows.spatial_tuple(stride, nd, "stride", 1)
    pad = conv_windows.spatial_tuple(pad, nd, "pad", 0)
    sizes = xl.shape[1:-1]
    out_sizes = tuple(_pool_out(*a, pooling_convention) for a in zip(sizes, kernel, stride, pad,
                                                                      strict=True))
    if min(out_sizes) <= 0:
        raise ValueError(f"Pooling: kernel {kernel} is larger than the padded input "
                         f"{tuple(s + 2 * p for s, p in zip(sizes, pad, strict=True))}")
    # windows that run past the padded input (ceil mode, 'same') read extra cells at the end
    extra = tuple(max(0, (o - 1) * s + k - n - 2 * p)
                  for o, s, k, n, p in zip(out_sizes, stride, kernel, sizes, pad, strict=True))
    after = tuple(p + e for p, e in zip(pad, extra, strict=True))
    offsets = conv_windows.kernel_offsets(kernel)
    ones = (1,) * nd

    def part(src: Any, offset: tuple[int, ...]) -> Any:
        return src[conv_windows.offset_slices(offset, out_sizes, stride, ones)]

    padded = tuple(n + p + a for n, p, a in zip(sizes, pad, after, strict=True))
    # windows that tile the padded input exactly (the usual 2x2/2) each write their own cells
    tiles = stride == kernel and all(o * s == n for o, s, n in zip(out_sizes, stride, padded,
                                                                     strict=True))

    def scatter(write: Any) -> Any:
        """The input gradient: ``write(k, dst)`` puts kernel position k's share into its
        strided slice ``dst`` (assigning when windows tile the input, else adding)."""
        shape = (x.shape[0], *padded, xl.shape[-1])
        gpad = xp.empty(shape, dtype=x.dtype) if tiles else xp.zeros(shape, dtype=x.dtype)
        for k, offset in enumerate(offsets):
            write(k, part(gpad, offset))
        return conv_windows.from_channels_last(gpad[conv_windows.interior(pad, sizes)], last)

    if (pool_type == "max" and kernel == (2, 2) and stride == (2, 2) and tiles
            and not any(pad) and xl.flags.c_contiguous and cpu_kernels.available(xl)):
        return _max_pool_2x2(data, xl, last)
    if (pool_type == "max" and nd == 2 and math.prod(kernel) <= 255
            and cpu_kernels.available(xl)):
        return _max_pool_compiled(data, xl, last, kernel, stride, pad, out_sizes)
    if pool_type == "max":
        # the dtype's lowest value, not -inf: a window wholly in the padding (ceil mode) gives
        # that finite value, as MXNet's kernels do
        kind = numpy.finfo if numpy.dtype(x.dtype).kind == "f" else numpy.iinfo
        xpad = conv_windows.pad_channels_last(xp, xl, pad, after, value=kind(x.dtype).min)
        out = xp.copy(part(xpad, offsets[0]))
        for offset in offsets[1:]:
            xp.maximum(out, part(xpad, offset), out=out)

        def max_backward(g: Any) -> tuple[Any]:
            # The argmax is recovered from the kept input and max: the first kernel position
            # equal to the max (MXNet's backward picks the first). Branch-free boolean passes;
            # a stored index array written with masked stores cost 3-5 ms per kernel position
            # on a 64x32x32x32 input, more than the whole pooling.
            g_l = conv_windows.to_channels_last(g, last)
            free = xp.ones(out.shape, dtype=bool)  # outputs whose max is not yet claimed
            hit = xp.empty(out.shape, dtype=bool)

            def write_first_max(k: int, dst: Any) -> None:
                xp.equal(part(xpad, offsets[k]), out, out=hit)
                xp.logical_and(hit, free, out=hit)
                # hit is a subset of free: xor clears exactly the outputs claimed now
                xp.logical_xor(free, hit, out=free)
                if tiles:
                    xp.multiply(g_l, hit, out=dst)
                else:
                    dst += g_l * hit

            return (scatter(write_first_max),)

        return apply_op(conv_windows.from_channels_last(out, last), (data,), max_backward)

    xpad = conv_windows.pad_channels_last(xp, xl, pad, after)
    out = xp.copy(part(xpad, offsets[0]))
    for offset in offsets[1:]:
        out += part(xpad, offset)
    divisor: Any = None
    if pool_type == "avg":
        include = True if count_include_pad is None else bool(count_include_pad)
        # padding counts when included, cells beyond the padding (ceil mode) never do
        lo = (0,) * nd if include else pad
        hi = tuple(n + (2 * p if include else p) for n, p in zip(sizes, pad, strict=True))
        divisor = _window_counts(xp, out_sizes, kernel, stride, lo, hi, x.dtype)
        out /= divisor

    def sum_backward(g: Any) -> tuple[Any]:
        g_l = conv_windows.to_channels_last(g, last)
        share = g_l if divisor is None else g_l / divisor

        def write_share(k: int, dst: Any) -> None:
            if tiles:
                dst[...] = share
            else:
                dst += share

        return (scatter(write_share),)

    return apply_op(conv_windows.from_channels_last(out, last), (data,), sum_backward)


def _max_pool_2x2(data: NDArray, xl: Any, last: bool) -> NDArray:
    """The CNN's usual 2x2/stride-2 max-pool of channels-last float32 data, compiled: one
    pass writes the max and a uint8 window position of the first maximum (the cell MXNet's
    backward picks); the backward is one pass that writes every input cell once."""
    n, h, w, c = xl.shape
    out = numpy.empty((n, h // 2, w // 2, c), dtype=xl.dtype)
    arg = numpy.empty(out.shape, dtype=numpy.uint8)
    cpu_kernels.max_pool_2x2(xl, out, arg)

    def backward(g: Any) -> tuple[Any]:
        # contiguous (a convolution's input gradient is a view into its padded buffer): the
        # kernel compiled for strided arrays runs ~20x slower than this quarter-size copy
        g_l = numpy.ascontiguousarray(conv_windows.to_channels_last(g, last), dtype=xl.dtype)
        gx = numpy.empty_like(xl)
        cpu_kernels.max_pool_2x2_grad(g_l, arg, gx)
        return (conv_windows.from_channels_last(gx, last),)

    return apply_op(conv_windows.from_channels_last(out, last), (data,), backward)


def _max_pool_compiled(data: NDArray, xl: Any, last: bool, kernel: tuple[int, ...],
                       stride: tuple[int, ...], pad: tuple[int, ...],
                       out_sizes: tuple[int, ...]) -> NDArray:
    """Any other 2-D max-pool of float data (ResNet's 3x3/stride-2 stem pool), compiled:
    one pass for the max and the first maximum's window position, one for the gradient
    (the numpy path's nine shifted passes each way ran on one thread, 10x slower)."""
    x = numpy.ascontiguousarray(xl)
    out = numpy.empty((x.shape[0], *out_sizes, x.shape[-1]), dtype=x.dtype)
    arg = numpy.empty(out.shape, dtype=numpy.uint8)
    geometry = (*kernel, *stride, *pad)
    cpu_kernels.max_pool_2d(x, *geometry, x.dtype.type(numpy.finfo(x.dtype).min), out, arg)

    def backward(g: Any) -> tuple[Any]:
        g_l = numpy.ascontiguousarray(conv_windows.to_channels_last(g, last), dtype=x.dtype)
        gx = numpy.empty_like(x)
        cpu_kernels.max_pool_2d_grad(g_l, arg, *geometry, gx)
        return (conv_windows.from_channels_last(gx, last),)

    return apply_op(conv_windows.from_channels_last(out, last), (data,), backward)


def _global_pool(data: NDArray, xl: Any, pool_type: str, last: bool) -> NDArray:
    """Pool each channel's whole extent to size 1, keeping the spatial dims."""
    xp = data.xp
    axes = tuple(range(1, xl.ndim - 1))
    if pool_type == "max":
        out = xl.max(axis=axes, keepdims=True)

        def max_backward(g: Any) -> tuple[Any]:
            # the gradient goes to the first maximum of each channel, as MXNet's backward
            n, c = xl.shape[0], xl.shape[-1]
            flat = xl.reshape(n, -1, c)
            first = flat.argmax(axis=1)[:, None, :] == xp.arange(flat.shape[1])[None, :, None]
            gl = (first * conv_windows.to_channels_last(g, last).reshape(n, 1, c)).astype(xl.dtype)
            return (conv_windows.from_channels_last(gl.reshape(xl.shape), last),)

        return apply_op(conv_windows.from_channels_last(out, last), (data,), max_backward)
    scale = 1.0 / math.prod(xl.shape[1:-1]) if pool_type == "avg" else 1.0
    if xl.size and xl.flags.c_contiguous and cpu_kernels.available(xl):
        return _global_sum_compiled(data, xl, scale, last)
    return _global_sum(data, xl, scale, last)


def _global_sum(data: NDArray, xl: Any, scale: float, last: bool) -> NDArray:
    """A global average (``scale`` 1/extent) or sum pool (``scale`` 1) of any array."""
    xp = data.xp
    out = xl.sum(axis=tuple(range(1, xl.ndim - 1)), keepdims=True)
    if scale != 1.0:
        out *= scale

    def backward(g: Any) -> tuple[Any]:
        gl = xp.empty_like(xl)  # the input's memory layout, so the next backward reads it fast
        gl[...] = conv_windows.to_channels_last(g, last) * scale
        return (conv_windows.from_channels_last(gl, last),)

    return apply_op(conv_windows.from_channels_last(out, last), (data,), backward)


def _global_sum_compiled(data: NDArray, xl: Any, scale: float, last: bool) -> NDArray:
    """A global average or sum pool of contiguous channels-last float32 data, compiled: the
    same floats as numpy's sum over the spatial axes (then ``*= scale``), in one pass over
    the images split between the engine's threads; the backward writes each input cell once
    (numpy's broadcast assignment and its sum ran on one thread while the others idled)."""
    n, c = xl.shape[0], xl.shape[-1]
    flat = xl.reshape(n, -1, c)
    sums = numpy.empty((n, c), dtype=xl.dtype)
    cpu_kernels.channel_sums(flat, sums)
    if scale != 1.0:
        sums *= scale
    out = sums.reshape((n,) + (1,) * (xl.ndim - 2) + (c,))

    def backward(g: Any) -> tuple[Any]:
        g_l = conv_windows.to_channels_last(g, last).reshape(n, c) * scale
        gx = numpy.empty_like(xl)
        cpu_kernels.spread_channels(numpy.ascontiguousarray(g_l, dtype=xl.dtype),
                                    gx.reshape(n, -1, c))
        return (conv_windows.from_channels_last(gx, last),)

    return apply_op(conv_windows.from_channels_last(out, last), (data,), backward)


Pooling = pooling
