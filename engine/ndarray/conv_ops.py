"""2-D convolution and pooling (MXNet's ``Convolution`` and ``Pooling``, layout NCHW).

Both work on a strided *window view* of the padded input, shape (N, C, OH, OW, KH, KW),
made with ``as_strided`` (no copy; stride and dilation are folded into the view's strides).
Convolution copies that view once into an im2col matrix and does one batched GEMM over the
groups; its input gradient is scattered back with one strided add per kernel position
(KH·KW adds, not one per output pixel). The same code runs on numpy and cupy.

>>> from engine import nd
>>> x = nd.ones((1, 1, 4, 4)); w = nd.ones((2, 1, 3, 3))
>>> nd.Convolution(x, w, kernel=(3, 3), num_filter=2, no_bias=True).shape
(1, 2, 2, 2)
>>> nd.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max").shape
(1, 1, 2, 2)
"""

from __future__ import annotations

import math
from typing import Any

from .ndarray import NDArray, apply_op, needs_grad


def _pair(value: Any, name: str) -> tuple[int, int]:
    if value is None or value == ():
        raise ValueError(f"{name} must be given")
    if isinstance(value, int):
        return (value, value)
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        return (value[0], value[0])
    if len(value) != 2:
        raise ValueError(f"{name} must have 2 entries for a 2-D op, got {value}")
    return value  # type: ignore[return-value]


def _lift(value: Any, height: int = 1) -> Any:
    """A 1-D kernel/stride/pad argument as the 2-D one of a height-1 image."""
    if value is None:
        return None
    if isinstance(value, int):
        return (height, value)
    value = tuple(int(v) for v in value)
    return (height, value[0]) if len(value) == 1 else value


def _windows(xp: Any, xpad: Any, out_hw: tuple[int, int], kernel: tuple[int, int],
             stride: tuple[int, int], dilate: tuple[int, int]) -> Any:
    """A read-only view (N, C, OH, OW, KH, KW) of the windows of a padded NCHW array."""
    n, c = xpad.shape[:2]
    s_n, s_c, s_h, s_w = xpad.strides
    shape = (n, c, out_hw[0], out_hw[1], kernel[0], kernel[1])
    strides = (s_n, s_c, s_h * stride[0], s_w * stride[1], s_h * dilate[0], s_w * dilate[1])
    return xp.lib.stride_tricks.as_strided(xpad, shape=shape, strides=strides)


def _scatter_windows(xp: Any, gpad: Any, gwin: Any, out_hw: tuple[int, int],
                     kernel: tuple[int, int], stride: tuple[int, int],
                     dilate: tuple[int, int]) -> None:
    """Add window gradients, laid out (KH, KW, N, C, OH, OW) so each kernel position is one
    contiguous block, back into the padded input gradient."""
    oh, ow = out_hw
    for p in range(kernel[0]):
        h0 = p * dilate[0]
        rows = slice(h0, h0 + stride[0] * (oh - 1) + 1, stride[0])
        for q in range(kernel[1]):
            w0 = q * dilate[1]
            cols = slice(w0, w0 + stride[1] * (ow - 1) + 1, stride[1])
            gpad[:, :, rows, cols] += gwin[p, q]


def _pad(xp: Any, x: Any, pad: tuple[int, int], extra: tuple[int, int] = (0, 0),
         value: float = 0.0) -> Any:
    if pad == (0, 0) and extra == (0, 0):
        return x
    widths = ((0, 0), (0, 0), (pad[0], pad[0] + extra[0]), (pad[1], pad[1] + extra[1]))
    return xp.pad(x, widths, mode="constant", constant_values=value)


def convolution(data: NDArray, weight: NDArray, bias: NDArray | None = None,
                kernel: Any = None, stride: Any = (1, 1), dilate: Any = (1, 1),
                pad: Any = (0, 0), num_filter: int | None = None, num_group: int = 1,
                no_bias: bool = False, layout: str = "NCHW", **_: Any) -> NDArray:
    """Convolution of ``data`` (N, C, H, W) with ``weight`` (F, C/groups, KH, KW); 1-D data
    (N, C, W) with a (F, C/groups, K) weight runs as height-1 2-D."""
    if data.ndim == 3 and layout in ("NCW", "NCHW"):
        out = convolution(data.expand_dims(2), weight.expand_dims(2), bias,
                          _lift(kernel), _lift(stride, 1), _lift(dilate, 1), _lift(pad, 0),
                          num_filter, num_group, no_bias)
        return out.squeeze(2)
    if layout != "NCHW":
        raise ValueError(f"Convolution supports layouts 'NCHW' and 'NCW' only, got {layout!r}")
    x, w = data._data, weight._data
    xp = data.xp
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(
            f"Convolution expects 4-D data and weight, got shapes {x.shape} and {w.shape}"
        )
    kernel = _pair(kernel if kernel is not None else w.shape[2:], "kernel")
    stride, dilate, pad = _pair(stride, "stride"), _pair(dilate, "dilate"), _pair(pad, "pad")
    n, c, h, wd = x.shape
    f, cg, kh, kw = w.shape
    groups = int(num_group)
    if (kh, kw) != kernel:
        raise ValueError(f"Convolution: kernel {kernel} does not match weight shape {w.shape}")
    if c % groups or f % groups or cg * groups != c:
        raise ValueError(
            f"Convolution: data has {c} channels and weight {w.shape} with num_group={groups}; "
            f"weight must be (num_filter, channels/num_group, KH, KW)"
        )
    if num_filter is not None and f != num_filter:
        raise ValueError(f"Convolution: weight has {f} filters, num_filter={num_filter}")
    oh = (h + 2 * pad[0] - dilate[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dilate[1] * (kw - 1) - 1) // stride[1] + 1
    if oh <= 0 or ow <= 0:
        raise ValueError(
            f"Convolution: kernel {kernel} (dilate {dilate}) is larger than the padded input "
            f"{(h + 2 * pad[0], wd + 2 * pad[1])}"
        )
    xpad = _pad(xp, x, pad)
    win = _windows(xp, xpad, (oh, ow), kernel, stride, dilate)
    rows, k = n * oh * ow, cg * kh * kw
    # im2col: (N, OH, OW, G, Cg, KH, KW) → (G, rows, K), one copy
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(rows, groups, k).transpose(1, 0, 2)
    wmat = w.reshape(groups, f // groups, k)
    out = xp.matmul(cols, wmat.transpose(0, 2, 1))  # (G, rows, F/G)
    out = out.transpose(1, 0, 2).reshape(n, oh, ow, f).transpose(0, 3, 1, 2)
    use_bias = bias is not None and not no_bias
    if use_bias:
        out = out + bias._data.reshape(1, f, 1, 1)  # type: ignore[union-attr]
    out = xp.ascontiguousarray(out)
    inputs = (data, weight, bias) if use_bias else (data, weight)
    need_gx = needs_grad(data)  # a network's input data needs no gradient: skip col2im

    def backward(g: Any) -> tuple[Any, ...]:
        gmat = g.transpose(0, 2, 3, 1).reshape(rows, groups, f // groups).transpose(1, 0, 2)
        # a contiguous left operand keeps numpy's stacked matmul on the BLAS path
        gw = xp.matmul(xp.ascontiguousarray(gmat.transpose(0, 2, 1)), cols).reshape(w.shape)
        gx = None
        if need_gx:
            gcols = xp.matmul(gmat, wmat)  # (G, rows, K)
            gwin = xp.ascontiguousarray(
                gcols.transpose(1, 0, 2).reshape(n, oh, ow, c, kh, kw).transpose(4, 5, 0, 3, 1, 2))
            gpad = xp.zeros(xpad.shape, dtype=x.dtype)
            _scatter_windows(xp, gpad, gwin, (oh, ow), kernel, stride, dilate)
            gx = gpad[:, :, pad[0] : pad[0] + h, pad[1] : pad[1] + wd]
        if use_bias:
            return gx, gw, g.sum(axis=(0, 2, 3))
        return gx, gw

    return apply_op(out, inputs, backward)  # type: ignore[arg-type]


def _pool_out(size: int, k: int, s: int, p: int, full: bool) -> int:
    span = size + 2 * p - k
    return (math.ceil(span / s) if full else span // s) + 1


def pooling(data: NDArray, kernel: Any = (1, 1), pool_type: str = "max",
            global_pool: bool = False, stride: Any = None, pad: Any = (0, 0),
            pooling_convention: str = "valid", count_include_pad: bool = True,
            layout: str = "NCHW", **_: Any) -> NDArray:
    """Max or average pooling over (N, C, H, W); ``global_pool`` pools the whole plane.

    ``pooling_convention='full'`` rounds the output size up (Gluon's ``ceil_mode``).
    """
    if data.ndim == 3 and layout in ("NCW", "NCHW"):
        out = pooling(data.expand_dims(2), _lift(kernel, 1), pool_type, global_pool,
                      _lift(stride) if stride is not None else None, _lift(pad, 0),
                      pooling_convention, count_include_pad)
        return out.squeeze(2)
    if layout != "NCHW":
        raise ValueError(f"Pooling supports layouts 'NCHW' and 'NCW' only, got {layout!r}")
    if pool_type not in ("max", "avg", "sum"):
        raise ValueError(f"unknown pool_type {pool_type!r}; expected 'max', 'avg' or 'sum'")
    if pooling_convention not in ("valid", "full"):
        raise ValueError(
            f"pooling_convention must be 'valid' or 'full', got {pooling_convention!r}"
        )
    x = data._data
    xp = data.xp
    if x.ndim != 4:
        raise ValueError(f"Pooling expects 4-D (N, C, H, W) data, got shape {x.shape}")
    if global_pool:
        return _global_pool(data, pool_type)
    kernel = _pair(kernel, "kernel")
    stride = _pair(stride if stride is not None else kernel, "stride")
    pad = _pair(pad, "pad")
    n, c, h, wd = x.shape
    full = pooling_convention == "full"
    oh = _pool_out(h, kernel[0], stride[0], pad[0], full)
    ow = _pool_out(wd, kernel[1], stride[1], pad[1], full)
    if oh <= 0 or ow <= 0:
        raise ValueError(f"Pooling: kernel {kernel} is larger than the padded input {x.shape[2:]}")
    # windows that run past the padded input (ceil mode) read extra cells
    extra = (max(0, (oh - 1) * stride[0] + kernel[0] - h - 2 * pad[0]),
             max(0, (ow - 1) * stride[1] + kernel[1] - wd - 2 * pad[1]))
    ones = (1, 1)
    if pool_type == "max":
        xpad = _pad(xp, x, pad, extra, value=-xp.inf)
        win = _windows(xp, xpad, (oh, ow), kernel, stride, ones)
        flat = win.reshape(n, c, oh, ow, kernel[0] * kernel[1])
        arg = flat.argmax(axis=-1)
        out = xp.take_along_axis(flat, arg[..., None], axis=-1)[..., 0]

        def max_backward(g: Any) -> tuple[Any]:
            gpad = xp.zeros(xpad.shape, dtype=x.dtype)
            positions = xp.arange(kernel[0] * kernel[1]).reshape(-1, 1, 1, 1, 1)
            gwin = ((arg[None] == positions) * g[None]).astype(x.dtype, copy=False)
            gwin = gwin.reshape(kernel[0], kernel[1], n, c, oh, ow)
            _scatter_windows(xp, gpad, gwin, (oh, ow), kernel, stride, ones)
            return (gpad[:, :, pad[0] : pad[0] + h, pad[1] : pad[1] + wd],)

        return apply_op(xp.ascontiguousarray(out), (data,), max_backward)

    xpad = _pad(xp, x, pad, extra)
    win = _windows(xp, xpad, (oh, ow), kernel, stride, ones)
    total = win.sum(axis=(4, 5))
    if pool_type == "sum":
        divisor: Any = 1.0
    elif count_include_pad:
        # padding counts, cells beyond the padding (ceil mode) do not (as MXNet)
        cover = _pad(xp, xp.ones((1, 1, h + 2 * pad[0], wd + 2 * pad[1]), x.dtype), (0, 0), extra)
        divisor = _windows(xp, cover, (oh, ow), kernel, stride, ones).sum(axis=(4, 5))
    else:
        cover = _pad(xp, xp.ones((1, 1, h, wd), x.dtype), pad, extra)
        divisor = _windows(xp, cover, (oh, ow), kernel, stride, ones).sum(axis=(4, 5))
    out = (total / divisor).astype(x.dtype, copy=False)

    def avg_backward(g: Any) -> tuple[Any]:
        gpad = xp.zeros(xpad.shape, dtype=x.dtype)
        share = g / divisor
        gwin = xp.broadcast_to(share, (kernel[0], kernel[1], n, c, oh, ow))
        _scatter_windows(xp, gpad, gwin, (oh, ow), kernel, stride, ones)
        return (gpad[:, :, pad[0] : pad[0] + h, pad[1] : pad[1] + wd],)

    return apply_op(xp.ascontiguousarray(out), (data,), avg_backward)


def _global_pool(data: NDArray, pool_type: str) -> NDArray:
    x = data._data
    xp = data.xp
    if pool_type == "max":
        out = x.max(axis=(2, 3), keepdims=True)

        def max_backward(g: Any) -> tuple[Any]:
            # the gradient goes to the first maximum of each plane, as argmax picks it
            n, c, h, w = x.shape
            arg = x.reshape(n, c, h * w).argmax(axis=-1)
            onehot = (arg[..., None] == xp.arange(h * w)).astype(x.dtype)
            return ((onehot * g.reshape(n, c, 1)).reshape(x.shape),)

        return apply_op(out, (data,), max_backward)
    count = x.shape[2] * x.shape[3]
    if pool_type == "sum":
        return apply_op(x.sum(axis=(2, 3), keepdims=True), (data,),
                        lambda g: (xp.broadcast_to(g, x.shape).copy(),))
    out = x.mean(axis=(2, 3), keepdims=True)
    return apply_op(out, (data,), lambda g: (xp.broadcast_to(g / count, x.shape).copy(),))


Convolution = convolution
Pooling = pooling
