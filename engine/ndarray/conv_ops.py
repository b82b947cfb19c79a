"""N-d convolution (MXNet's ``Convolution``): 1-D, 2-D and 3-D, channels-first or -last.

The data is read through a channels-last window view (see :mod:`.conv_windows`) and copied once
into an im2col matrix (rows = N·out pixels, columns = kernel positions × channels), so each
layer is one large GEMM ``cols @ weight.T`` per group whose (rows, filters) result already
*is* the channels-last output: it is returned as a transposed view, never copied back to
NCHW. The backward is two GEMMs (weight gradient, kernel-position-major column gradient) and one
strided add per kernel position; the input gradient is skipped for a network's input data.

On numpy, 3x3 stride-1 ungrouped 2-D convolutions with enough channels and tiles run by
Winograd instead: F(4x4, 3x3) (:mod:`.winograd4`, 4x fewer multiply-adds) where numba
compiles its transforms and there are enough tiles, else F(2x2, 3x3) (:mod:`.winograd`:
2.25x fewer); every other geometry keeps im2col. On cupy, 2-D convolutions run through
cuDNN (:mod:`.cudnn`) where it loads, else im2col. Other float32 ungrouped
2-D convolutions on numpy build and scatter their columns with compiled single-pass kernels
(:mod:`.conv_kernels`, see :func:`_compiled_convolution`); cupy, float64, grouped and 1-D/3-D
convolutions keep the numpy copies below. A convolution of 1-pixel maps (where only one
kernel position reads data, the rest padding) is the Dense product of that position's
weights (:func:`_single_tap_convolution`; a non-finite weight at a padding position then
does not turn the output into NaN, as 0·inf would). Other maps with at most half as many
pixels as the kernel has positions (3x3 kernels on 2x2 maps) are one product with the
layer's dense matrix (:mod:`.dense_map`).

>>> from engine import nd
>>> x = nd.ones((1, 1, 4, 4)); w = nd.ones((2, 1, 3, 3))
>>> nd.Convolution(x, w, kernel=(3, 3), num_filter=2, no_bias=True).shape
(1, 2, 2, 2)
>>> nd.Convolution(nd.ones((1, 3, 5)), nd.ones((4, 3, 2)), nd.zeros((4,)), kernel=2,
...                num_filter=4).shape
(1, 4, 4)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache, partial
from typing import Any

import numpy as np

from .. import autograd
from ..autograd import WRITTEN
from . import (
    conv_kernels,
    conv_windows,
    cpu_kernels,
    cudnn,
    dense_map,
    gemm,
    weight_prep,
    winograd,
    winograd4,
)
from .kernel_threads import defer, run_tasks
from .ndarray import NDArray, apply_op, needs_grad
from .pool_ops import Pooling, pooling  # noqa: F401 - re-exported for older imports


def group_matrix(xp: Any, mat: Any, groups: int) -> Any:
    """(rows, KK, C) channels-last columns → (G, rows, KK·C/G): a view when G == 1."""
    rows, kk, c = mat.shape
    if groups == 1:
        return mat.reshape(1, rows, kk * c)
    split = mat.reshape(rows, kk, groups, c // groups).transpose(2, 0, 1, 3)
    return xp.ascontiguousarray(split).reshape(groups, rows, kk * (c // groups))


def ungroup_matrix(xp: Any, mat: Any, kk: int) -> Any:
    """Inverse of :func:`group_matrix`: (G, rows, KK·Cg) → (rows, KK, G·Cg)."""
    groups, rows, width = mat.shape
    if groups == 1:
        return mat.reshape(rows, kk, width // kk)
    split = mat.reshape(groups, rows, kk, width // kk).transpose(1, 2, 0, 3)
    return xp.ascontiguousarray(split).reshape(rows, kk, groups * (width // kk))


def grouped_matmul(xp: Any, a: Any, b: Any) -> Any:
    """``a @ b`` over a leading group axis; G == 1 runs as one 2-D GEMM (BLAS reads
    transposed views of 2-D operands without copying them)."""
    if a.shape[0] == 1:
        return (a[0] @ b[0])[None]
    return xp.matmul(a, b)


def kernel_major_product(xp: Any, mat: Any, wmat: Any, kk: int) -> Any:
    """``mat @ wmat`` per group with the result laid out kernel-position-major for col2im:
    (G, rows, A) @ (G, A, KK·B) → (KK, rows, G·B), one batched GEMM per group."""
    groups, rows, a = mat.shape
    b = wmat.shape[-1] // kk
    per_k = wmat.reshape(groups, a, kk, b).transpose(0, 2, 1, 3)  # (G, KK, A, B)
    out = xp.matmul(mat[:, None], xp.ascontiguousarray(per_k))  # (G, KK, rows, B)
    if groups == 1:
        return out[0]
    return xp.ascontiguousarray(out.transpose(1, 2, 0, 3)).reshape(kk, rows, groups * b)


def weight_to_rows(w: Any, channels_last: bool) -> Any:
    """A weight (F, Cg, *K) or channels-last (F, *K, Cg) as (F, KK·Cg) in (K, Cg) order."""
    if not channels_last:
        w = w.transpose(0, *range(2, w.ndim), 1)
    return w.reshape(w.shape[0], -1)


def rows_to_weight(mat: Any, shape: tuple[int, ...], channels_last: bool) -> Any:
    """Inverse of :func:`weight_to_rows` for a gradient of weight ``shape``."""
    if channels_last:
        return mat.reshape(shape)
    lead, cg, kernel = shape[0], shape[1], shape[2:]
    return mat.reshape(lead, *kernel, cg).transpose(0, len(shape) - 1, *range(1, len(shape) - 1))


def _conv_geometry(x: Any, w: Any, kernel: Any, stride: Any, dilate: Any, pad: Any,
                   num_filter: Any, groups: int, layout: str | None) -> tuple[Any, ...]:
    """(channels last, kernel, stride, dilate, pad, sizes, output sizes) of a convolution,
    checked: worked out once per shapes and arguments (a hybridized step asks for the same
    few every time), or each time when an argument is unhashable (a list)."""
    key = (tuple(x.shape), tuple(w.shape), kernel, stride, dilate, pad, num_filter, groups,
           layout)
    try:
        return _cached_geometry(key)
    except TypeError:  # unhashable: not cached (an error the check raises stays a ValueError)
        return _geometry(*key)


@lru_cache(maxsize=1024)
def _cached_geometry(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return _geometry(*key)


def _geometry(x_shape: tuple[int, ...], w_shape: tuple[int, ...], kernel: Any, stride: Any,
              dilate: Any, pad: Any, num_filter: Any, groups: int,
              layout: str | None) -> tuple[Any, ...]:
    nd = len(x_shape) - 2
    if nd not in (1, 2, 3) or len(w_shape) != len(x_shape):
        raise ValueError(f"Convolution expects 3-, 4- or 5-D data and a weight of the same "
                         f"rank, got shapes {x_shape} and {w_shape}")
    last = conv_windows.check_layout(layout, nd, "Convolution")
    kernel = conv_windows.spatial_tuple(kernel if kernel not in (None, ()) else
                                  (w_shape[1:-1] if last else w_shape[2:]), nd, "kernel")
    stride = conv_windows.spatial_tuple(stride, nd, "stride", 1)
    dilate = conv_windows.spatial_tuple(dilate, nd, "dilate", 1)
    pad = conv_windows.spatial_tuple(pad, nd, "pad", 0)
    c = x_shape[-1] if last else x_shape[1]
    f = w_shape[0]
    w_kernel, cg = (w_shape[1:-1], w_shape[-1]) if last else (w_shape[2:], w_shape[1])
    if tuple(w_kernel) != kernel:
        raise ValueError(f"Convolution: kernel {kernel} does not match weight shape {w_shape}")
    if groups < 1 or c % groups or f % groups or cg * groups != c:
        raise ValueError(
            f"Convolution: data has {c} channels and weight {w_shape} with num_group={groups}; "
            f"the weight must hold channels/num_group = {c // max(groups, 1)} input channels"
        )
    if num_filter is not None and f != int(num_filter):
        raise ValueError(f"Convolution: weight has {f} filters, num_filter={num_filter}")
    sizes = x_shape[1:-1] if last else x_shape[2:]
    out = tuple(conv_windows.conv_out_size(*args)
                for args in zip(sizes, kernel, stride, pad, dilate, strict=True))
    if min(out) <= 0:
        padded = tuple(s + 2 * p for s, p in zip(sizes, pad, strict=True))
        raise ValueError(f"Convolution: kernel {kernel} (dilate {dilate}) is larger than the "
                         f"padded input {padded}")
    return last, kernel, stride, dilate, pad, tuple(sizes), out


def convolution(data: NDArray, weight: NDArray, bias: NDArray | None = None,
                kernel: Any = None, stride: Any = (), dilate: Any = (), pad: Any = (),
                num_filter: int | None = None, num_group: int = 1, workspace: int = 1024,
                no_bias: bool = False, cudnn_tune: Any = None, cudnn_off: bool = False,
                layout: str | None = None, **_: Any) -> NDArray:
    """Convolution of ``data`` (N, C, *spatial) with ``weight`` (F, C/num_group, *kernel).

    Channels-last layouts (``NWC``, ``NHWC``, ``NDHWC``) take data (N, *spatial, C) and a
    weight (F, *kernel, C/num_group), as MXNet infers it. On a GPU, 2-D convolutions run
    through cuDNN (:mod:`.cudnn`) unless ``cudnn_off``, with at most ``workspace`` MB of
    scratch; ``cudnn_tune`` is accepted for MXNet compatibility and does nothing here.
    """
    x, w = data._data, weight._data
    xp = data.xp
    groups = int(num_group)
    last, kernel, stride, dilate, pad, sizes, out_sizes = _conv_geometry(
        x, w, kernel, stride, dilate, pad, num_filter, groups, layout)
    use_bias = bias is not None and not no_bias
    if xp is not np and not cudnn_off and len(kernel) == 2 and x.dtype == w.dtype \
            and (not use_bias or bias._data.dtype == x.dtype):  # type: ignore[union-attr]
        f = w.shape[0]
        y_shape = (x.shape[0], *out_sizes, f) if last else (x.shape[0], f, *out_sizes)
        planned = cudnn.plan(x, tuple(w.shape), y_shape, stride, pad, dilate, groups, last,
                             workspace)
        if planned is not None:
            return _cudnn_convolution(data, weight, bias if use_bias else None, planned, last)
    xl = conv_windows.to_channels_last(x, last)
    tap = _single_tap(sizes, out_sizes, kernel, dilate, pad)
    if tap is not None and xp is np and groups == 1 and x.dtype == w.dtype \
            and x.dtype in (np.float32, np.float64) \
            and (not use_bias or bias._data.dtype == x.dtype):  # type: ignore[union-attr]
        return _single_tap_convolution(data, weight, bias if use_bias else None, xl, tap, last)
    if xp is np and groups == 1 and x.size and dense_map.applies(sizes, kernel) \
            and x.dtype == w.dtype and x.dtype in (np.float32, np.float64) \
            and (not use_bias or bias._data.dtype == x.dtype):  # type: ignore[union-attr]
        plan = dense_map.Plan(sizes, out_sizes, kernel, stride, dilate, pad)
        return _dense_map_convolution(data, weight, bias if use_bias else None, xl, plan, last)
    if winograd.applies(xp, kernel, stride, dilate, groups, xl.shape, w.shape[0], pad) \
            and x.dtype == w.dtype and x.dtype in (np.float32, np.float64) \
            and (not use_bias or bias._data.dtype == x.dtype):  # type: ignore[union-attr]
        return _winograd_convolution(data, weight, bias if use_bias else None, xl, pad, last)
    if len(kernel) == 2 and groups == 1 and x.size and cpu_kernels.available(x, w) \
            and (not use_bias or cpu_kernels.available(bias._data)):  # type: ignore[union-attr]
        return _compiled_convolution(data, weight, bias if use_bias else None, xl, last,
                                     (kernel, stride, dilate, pad, out_sizes))
    xpad = conv_windows.pad_channels_last(xp, xl, pad, pad)
    win = conv_windows.windows(xp, xpad, out_sizes, kernel, stride, dilate)
    n, c, f = x.shape[0], xl.shape[-1], w.shape[0]
    rows, kk = n * conv_windows.count(out_sizes), conv_windows.count(kernel)
    # im2col: the one copy of the input, (rows, KK, C) with channels contiguous
    cols = group_matrix(xp, xp.ascontiguousarray(win).reshape(rows, kk, c), groups)
    wmat = weight_to_rows(w, last).reshape(groups, f // groups, -1)
    out = grouped_matmul(xp, cols, wmat.transpose(0, 2, 1))  # (G, rows, F/G)
    out = out[0] if groups == 1 else xp.ascontiguousarray(out.transpose(1, 0, 2))
    out = out.reshape(rows, f)
    if use_bias:
        out += bias._data.reshape(1, f).astype(out.dtype, copy=False)  # type: ignore[union-attr]
    out_l = out.reshape(n, *out_sizes, f)
    inputs = (data, weight, bias) if use_bias else (data, weight)
    need_gx = needs_grad(data)  # a network's input data needs no gradient: skip col2im

    def backward(g: Any) -> tuple[Any, ...]:
        gmat = group_matrix(xp, conv_windows.to_channels_last(g, last).reshape(rows, 1, f), groups)
        if xp is np and cols.shape[-1] <= f // groups:  # a narrow im2col (a 3-channel
            # image: K = 27): OpenBLAS runs the transposed product 1.4x faster
            gw = grouped_matmul(xp, cols.transpose(0, 2, 1), gmat).transpose(0, 2, 1)
        else:
            gw = grouped_matmul(xp, gmat.transpose(0, 2, 1), cols)  # (G, F/G, KK·Cg)
        gw = rows_to_weight(gw.reshape(f, -1), w.shape, last)
        gx = None
        if need_gx:
            gcols = kernel_major_product(xp, gmat, wmat, kk)  # (KK, rows, C)
            gpad = xp.zeros(xpad.shape, dtype=x.dtype)
            conv_windows.col2im_add(gpad, gcols.reshape(kk, n, *out_sizes, c), out_sizes, kernel,
                              stride, dilate)
            gx = conv_windows.from_channels_last(gpad[conv_windows.interior(pad, sizes)], last)
        if use_bias:
            return gx, gw, gmat.sum(axis=1).reshape(f)
        return gx, gw

    return apply_op(conv_windows.from_channels_last(out_l, last), inputs,  # type: ignore[arg-type]
                    backward)


def _cudnn_convolution(data: NDArray, weight: NDArray, bias: NDArray | None,
                       planned: cudnn.Plan, last: bool) -> NDArray:
    """One cuDNN call each way: forward, input gradient (skipped for a network's input
    data) and weight gradient (skipped for a frozen weight)."""
    xp = data.xp
    x, w = xp.ascontiguousarray(data._data), xp.ascontiguousarray(weight._data)
    y = planned.forward(x, w)
    f = w.shape[0]
    if bias is not None:
        y += bias._data.reshape((1, 1, 1, f) if last else (1, f, 1, 1))
    inputs = (data, weight, bias) if bias is not None else (data, weight)
    need_gx, need_gw = needs_grad(data), needs_grad(weight)

    def backward(g: Any) -> tuple[Any, ...]:
        dy = xp.ascontiguousarray(g)
        gx = planned.backward_data(w, dy, x.shape) if need_gx else None
        gw = planned.backward_filter(x, dy, w.shape) if need_gw else None
        if bias is not None:
            return gx, gw, dy.sum(axis=(0, 1, 2) if last else (0, 2, 3))
        return gx, gw

    return apply_op(y, inputs, backward)  # type: ignore[arg-type]


def _single_tap(sizes: tuple[int, ...], out_sizes: tuple[int, ...], kernel: tuple[int, ...],
                dilate: tuple[int, ...], pad: tuple[int, ...]) -> tuple[int, ...] | None:
    """The one kernel position that reads data when the input and output are a single
    pixel (every other position reads padding), else None."""
    if any(s != 1 for s in (*sizes, *out_sizes)):
        return None
    if any(p % d or p // d >= k for p, d, k in zip(pad, dilate, kernel, strict=True)):
        return None
    return tuple(p // d for p, d in zip(pad, dilate, strict=True))


def _single_tap_convolution(data: NDArray, weight: NDArray, bias: NDArray | None, xl: Any,
                            tap: tuple[int, ...], last: bool) -> NDArray:
    """A convolution of 1-pixel maps (ResNet's last stage on 32x32 images: a 3x3, padding-1
    convolution of 1x1 maps): a Dense layer with the weights of the one kernel position that
    reads data. im2col would multiply every other position's weights by padding zeros: 9x
    the work, for the same sums (less the zero products)."""
    w = weight._data
    n, c, f = xl.shape[0], xl.shape[-1], w.shape[0]
    x2 = xl.reshape(n, c)
    at = (slice(None), *tap, slice(None)) if last else (slice(None), slice(None), *tap)
    # (F, C), copied: the view steps over the other kernel positions, and numpy multiplies
    # such a view with its own loop, not BLAS (9x slower here for 512 channels, one thread).
    # The copy and the gradient's zeros stream the whole weight (9.4 MB for 512x512x3x3),
    # more than the product itself: the copy runs in blocks of filters on the engine's
    # threads, the gradient in one compiled pass per filter (conv_kernels.tap_gradient).
    # A hybridized forward queues the copy ahead on the other threads (weight_prep).
    wc = weight_prep.prepared(f"tap{tap}", w, partial(_tap_weight, at))
    out = gemm.matmul(x2, wc.T)
    if bias is not None:
        out += bias._data
    need_gx = needs_grad(data)

    def backward(g: Any) -> tuple[Any, ...]:
        g2 = conv_windows.to_channels_last(g, last).reshape(n, f)

        def weight_gradient(gw: Any) -> None:
            tap_grad = gemm.matmul(g2.T, x2)
            if gw.flags.c_contiguous and cpu_kernels.available(gw, tap_grad):
                spatial = w.shape[1:-1] if last else w.shape[2:]
                position = int(np.ravel_multi_index(tap, spatial))
                offset, step = (position * c, 1) if last else (position, math.prod(spatial))
                conv_kernels.tap_gradient(tap_grad, offset, step, gw.reshape(f, -1))
                return

            def write(f0: int, f1: int) -> None:  # zeros but for the tap, a cached block
                block = gw[f0:f1]
                block.fill(0)
                block[at] = tap_grad[f0:f1]

            run_tasks([partial(write, f0, f1) for f0, f1 in cpu_kernels.leading_blocks(w)])

        return _product_gradients(
            weight, need_gx, weight_gradient,
            lambda: conv_windows.from_channels_last(gemm.matmul(g2, wc).reshape(xl.shape), last),
            None if bias is None else (lambda: g2.sum(axis=0)))

    inputs = (data, weight) if bias is None else (data, weight, bias)
    out_l = out.reshape(n, *([1] * (xl.ndim - 2)), f)
    return apply_op(conv_windows.from_channels_last(out_l, last), inputs,  # type: ignore[arg-type]
                    backward)


def _dense_map_convolution(data: NDArray, weight: NDArray, bias: NDArray | None, xl: Any,
                           plan: dense_map.Plan, last: bool) -> NDArray:
    """A convolution of maps with fewer pixels than half its kernel's positions (ResNet's
    3x3 convolutions of 2x2 maps) as one product with the dense matrix of the whole layer
    (:mod:`.dense_map`): 2.25x fewer multiply-adds than im2col there, and one well-shaped
    GEMM where Winograd F(2x2) has 16 small ones and its transforms."""
    w = weight._data
    n, f = xl.shape[0], w.shape[0]
    x2 = np.ascontiguousarray(xl).reshape(n, -1)
    # D reads the weight alone: a hybridized forward builds it ahead (weight_prep)
    dt = weight_prep.prepared("dense", w, partial(plan.matrix, last=last))  # Dᵀ
    out = gemm.matmul(x2, dt.T)  # (N, OH·OW·F): the channels-last output
    if bias is not None:
        out.reshape(-1, f)[...] += bias._data
    need_gx = needs_grad(data)

    def backward(g: Any) -> tuple[Any, ...]:
        g2 = np.ascontiguousarray(conv_windows.to_channels_last(g, last)).reshape(n, -1)
        return _product_gradients(
            weight, need_gx, partial(plan.weight_gradient, x2, g2, w.shape, last),
            lambda: conv_windows.from_channels_last(gemm.matmul(g2, dt).reshape(xl.shape), last),
            None if bias is None else (lambda: g2.reshape(n * plan.ohow, f).sum(axis=0)))

    inputs = (data, weight) if bias is None else (data, weight, bias)
    out_l = out.reshape(n, *plan.out_sizes, f)
    return apply_op(conv_windows.from_channels_last(out_l, last), inputs,  # type: ignore[arg-type]
                    backward)


def _product_gradients(weight: NDArray, need_gx: bool, weight_gradient: Callable[[Any], Any],
                       data_gradient: Callable[[], Any],
                       bias_gradient: Callable[[], Any] | None) -> tuple[Any, ...]:
    """The backward of a convolution that is one product (one kernel position, a dense
    matrix): ``weight_gradient(gw)`` fills the Parameter's own gradient buffer when autograd
    offers it (else a new array), handed to another thread beside the data gradient where
    it may be; then the data gradient (when ``need_gx``) and the bias gradient (when given)."""
    w = weight._data
    target = _gradient_buffer(weight, w.shape, w.dtype)
    gw = np.empty_like(w) if target is None else target
    if not (need_gx and defer(partial(weight_gradient, gw), gw)):
        weight_gradient(gw)
    gx = data_gradient() if need_gx else None
    written = gw if target is None else WRITTEN
    return (gx, written) if bias_gradient is None else (gx, written, bias_gradient())


def _tap_weight(at: tuple[slice | int, ...], w: Any, out: Any) -> Any:
    """The (F, C) weights of the kernel position ``at`` of ``w`` (into ``out`` unless
    None), copied in blocks of filters on the engine's threads."""
    wc = np.empty((w.shape[0], w[:1][at].shape[1]), dtype=w.dtype) if out is None else out
    run_tasks([partial(np.copyto, wc[f0:f1], w[f0:f1][at])
               for f0, f1 in cpu_kernels.leading_blocks(w)])
    return wc


def _winograd_convolution(data: NDArray, weight: NDArray, bias: NDArray | None, xl: Any,
                          pad: tuple[int, ...], last: bool) -> NDArray:
    """A 3x3 stride-1 convolution by Winograd F(4x4, 3x3) (:mod:`.winograd4`) or F(2x2, 3x3)
    (:mod:`.winograd`): 4x or 2.25x fewer multiply-adds than im2col, and no im2col matrix to
    keep for the backward."""
    w = weight._data
    # the filter transforms read a (F, C, 3, 3) weight as stored (no transposing copy of
    # it first), a channels-last one as its rows
    filters = weight_to_rows(w, last) if last else w
    # F(4x4, 3x3) where its compiled transforms run and its filter transforms (36·F·C
    # values each way) are small beside the data's: 1.2-1.7x faster than F(2x2) there
    # (bench/conv_paths.py)
    algorithm = winograd4 if winograd4.applies(xl, filters, pad) else winograd
    plan = algorithm.Plan(xl.shape, w.shape[0], pad)

    def prepare(kind: str, transform: Callable[..., Any]) -> Any:
        # the filter transforms read the weight alone: a hybridized forward queues them
        # ahead on the other threads (engine.ndarray.weight_prep)
        return weight_prep.prepared(kind, w, partial(_of_stored_weight, transform, last))

    out, v, u = algorithm.forward(plan, xl, filters, None if bias is None else bias._data,
                                  prepare)
    need_gx = needs_grad(data)

    def backward(g: Any) -> tuple[Any, ...]:
        gl = conv_windows.to_channels_last(g, last)
        if last:
            gw, gx = algorithm.backward(plan, gl, v, u, need_gx)
            gw = rows_to_weight(gw, w.shape, last)
        else:  # written in the stored layout (no transposing copy after), into the
            # Parameter's own gradient buffer when autograd offers it
            target = _gradient_buffer(weight, w.shape, w.dtype)
            gw, gx = algorithm.backward(plan, gl, v, u, need_gx, w.shape, target)
            gw = gw if target is None else WRITTEN
        gx = None if gx is None else conv_windows.from_channels_last(gx, last)
        if bias is not None:
            return gx, gw, _bias_gradient(gl)
        return gx, gw

    inputs = (data, weight) if bias is None else (data, weight, bias)
    return apply_op(conv_windows.from_channels_last(out, last), inputs,  # type: ignore[arg-type]
                    backward)


def _gradient_buffer(weight: NDArray, shape: tuple[int, ...], dtype: Any) -> Any:
    """The Parameter's own gradient buffer when autograd offers it (see
    engine.autograd.direct_grad_buffer) and the weight gradient can be written there as
    computed (a C-ordered numpy array of its shape and dtype), else None. Writing there
    saves the copy of every weight gradient a step would otherwise make."""
    target = autograd.direct_grad_buffer(weight)
    if type(target) is not np.ndarray or target.shape != tuple(shape) \
            or target.dtype != dtype or not target.flags.c_contiguous:
        return None
    return target


def _rows_of_weight(w: Any, out: Any) -> Any:
    """A (F, C, *K) weight as C-ordered rows (F, KK·C) in (K, C) order (into ``out`` unless
    None)."""
    rows = weight_to_rows(w, False)
    if out is None:
        return np.ascontiguousarray(rows)
    np.copyto(out, rows)
    return out


def _of_stored_weight(transform: Callable[..., Any], last: bool, w: Any, out: Any) -> Any:
    """``transform`` of a 3x3 weight ``w`` (into ``out`` unless None) as the Winograd paths
    read it: a channels-last weight as its rows, a (F, C, 3, 3) one as stored."""
    return transform(weight_to_rows(w, last) if last else w, out=out)


def _bias_gradient(gl: Any) -> Any:
    """Σ over every pixel of the channels-last output gradient: compiled over a fixed split
    of its rows where it is float32 numpy (see conv_kernels.bias_grad), else numpy's sum."""
    if not cpu_kernels.available(gl):
        return gl.sum(axis=(0, 1, 2))
    rows = np.ascontiguousarray(gl).reshape(-1, gl.shape[-1])
    gb = np.empty(rows.shape[1], dtype=rows.dtype)
    conv_kernels.bias_grad(rows, gb)
    return gb


# Bytes of columns per block of images: the forward multiplies each block of im2col columns
# right after writing it, the data gradient scatters each block of column gradients right
# after its GEMM, so the columns are read back from cache, not memory (Conv(32→64) on 16x16
# maps, batch 64: 0.4 ms of 4.7 saved forward, 0.6 ms of 4.3 backward; 1 MiB blocks ran as
# fast as 0.3-2.4 MiB ones).
_BLOCK_BYTES = 1 << 20
# Each block's GEMM packs the whole weight matrix again: below this many rows a block costs
# more than the cache saves (ResNet's 512-channel 4x4 maps, 16 rows an image: the data
# gradient in 48-row blocks ran 1.6x slower), so such layers run as one block.
_MIN_BLOCK_ROWS = 512
# A network input layer's kernel-major columns, made by blocks of images, are kept for the
# backward's weight gradient up to this size (making them again took as long as the
# product: model-zoo resnet18_v1's 7x7 input layer, 32x32 images, batch 32: 4.8 MB, 0.17 ms
# a block to make); larger (224x224 images: 236 MB at batch 32) they are made again.
_KEEP_COLUMNS_BYTES = 32 << 20


def _images_per_block(n: int, per_image: int, row_bytes: int) -> int:
    step = max(1, _BLOCK_BYTES // (per_image * row_bytes))
    return step if step * per_image >= _MIN_BLOCK_ROWS else n


def _compiled_convolution(data: NDArray, weight: NDArray, bias: NDArray | None, xl: Any,
                          last: bool, geometry: tuple[tuple[int, ...], ...]) -> NDArray:
    """A float32 2-D ungrouped convolution on numpy whose im2col and col2im are one compiled
    pass each (:mod:`.conv_kernels`), padding included.

    Channels-last data (every hidden layer's: outputs are channels-last) takes
    (rows, KH·KW·C) columns; a few-channel channels-first image (a network's NCHW input)
    takes kernel-major (C·KH·KW, rows) columns, read by the GEMMs transposed, whose weight
    order is the (F, C, KH, KW) weight's own. The data gradient is one GEMM into columns of
    the same layout, then one compiled scatter into a fresh input gradient.
    """
    x, w = data._data, weight._data
    kernel, stride, dilate, pad, out_sizes = geometry
    args = (*kernel, *stride, *dilate, *pad, *out_sizes)
    n, c, f = xl.shape[0], xl.shape[-1], w.shape[0]
    rows, kk = n * conv_windows.count(out_sizes), conv_windows.count(kernel)
    # Kernel-major columns for channels-first data whose channel runs are shorter than one
    # SIMD vector (a 3-channel image). Wider channels-first data ran 1.4x slower that way
    # (the GEMMs read deep columns transposed): it is copied channels-last first (one pass,
    # 1/KK of the columns' size; 1.07x faster than gathering the columns from it directly).
    kernel_major = not last and x.flags.c_contiguous and c * x.itemsize < 32
    if not kernel_major:
        xl = np.ascontiguousarray(xl)
    per_image = rows // n
    kept: list[Any] | None = None  # a blocked kernel-major forward's columns, if kept
    if kernel_major:  # cols (C·KK, rows), weight (F, C·KK) as stored
        wmat = w.reshape(f, c * kk)
        step = _images_per_block(n, per_image, c * kk * x.itemsize)
        if step < n:  # by blocks of images, each block's columns in a buffer of their own
            # (slices of one (C·KK, rows) array ran 1.2x slower: read with a long stride),
            # multiplied and biased while in cache (issue 11's CNN's input layer: 3.2 -> 2.4
            # ms at 2 threads, 3.9 -> 3.4 at 1, against the columns of all images at once)
            cols = None
            out = np.empty((rows, f), dtype=x.dtype)
            b = None if bias is None else bias._data
            if c * kk * rows * x.itemsize <= _KEEP_COLUMNS_BYTES \
                    and autograd.is_recording() and needs_grad(weight):  # a backward to come
                kept = [np.empty((c * kk, min(step, n - n0) * per_image), dtype=x.dtype)
                        for n0 in range(0, n, step)]
            run_tasks([partial(_kernel_major_product, x[n0:n0 + step], args, wmat, b,
                               out[n0 * per_image:(n0 + step) * per_image],
                               None if kept is None else kept[i])
                       for i, n0 in enumerate(range(0, n, step))])
        else:
            cols = np.empty((c * kk, rows), dtype=x.dtype)
            conv_kernels.im2col_kernel_major(x, *args, cols)
            out = gemm.matmul(cols.T, wmat.T)
    else:  # cols (rows, KK·C), weight (F, KK·C) in (kh, kw, c) order: a copy of a
        # (F, C, KH, KW) weight, which a hybridized forward queues ahead (weight_prep)
        cols = np.empty((rows, kk * c), dtype=x.dtype)
        copied = not last and kk > 1 and c > 1  # else the rows are a view of it
        wmat = weight_prep.prepared("rows", w, _rows_of_weight) if copied \
            else weight_to_rows(w, last)
        out = np.empty((rows, f), dtype=x.dtype)
        step = _images_per_block(n, per_image, kk * c * x.itemsize)
        if step >= n:  # one block: the kernel and the GEMM split over the threads each
            conv_kernels.im2col_rows(xl, *args, cols)
            gemm.matmul(cols, wmat.T, out)
        else:  # each block of columns is multiplied while in cache: one task per block
            run_tasks([partial(_columns_product, xl[n0:n0 + step], args, wmat,
                               cols[n0 * per_image:(n0 + step) * per_image],
                               out[n0 * per_image:(n0 + step) * per_image])
                       for n0 in range(0, n, step)])
    if bias is not None and cols is not None:  # (the blocks above added theirs)
        conv_kernels.add_bias(out, bias._data)
    out_l = out.reshape(n, *out_sizes, f)
    inputs = (data, weight) if bias is None else (data, weight, bias)
    need_gx = needs_grad(data)  # a network's input data needs no gradient: skip col2im

    def backward(g: Any) -> tuple[Any, ...]:
        gmat = conv_windows.to_channels_last(g, last).reshape(rows, f)
        gx = None
        # the weight gradient sums over every row: partial products over fixed blocks of
        # rows, run beside the data gradient's blocks
        if cols is None:  # kernel-major columns by blocks of images, kept or made again
            transposed = True
            tasks, weight_grad = _kernel_major_weight_tasks(x, args, gmat, c * kk, step, kept)
        else:
            transposed = kernel_major or cols.shape[-1] <= f  # narrow columns: OpenBLAS
            # runs the transposed product faster
            tasks, weight_grad = (gemm.matmul_k_tasks(cols if kernel_major else cols.T, gmat)
                                  if transposed else gemm.matmul_k_tasks(gmat.T, cols))

        def weight_gradient() -> Any:
            gw = weight_grad().T if transposed else weight_grad()
            return gw.reshape(w.shape) if kernel_major else rows_to_weight(gw, w.shape, last)

        dtype = np.result_type(x, gmat)
        target = _gradient_buffer(weight, w.shape, dtype)  # the Parameter's own, or None
        deferred = None
        if need_gx:  # the weight gradient may wait on another thread (engine.ndarray.
            # kernel_threads.deferring); without a data gradient it is the whole backward
            out = np.empty(w.shape, dtype=dtype) if target is None else target
            if defer(partial(_finish_weight_gradient, tasks, weight_gradient, out), out):
                deferred, tasks = out, []
            gx_tasks, data_grad = _input_gradient(gmat, wmat, x.shape if kernel_major
                                                  else xl.shape, args, kernel_major)
            tasks += gx_tasks
        gb = None
        if bias is not None:  # a task beside the products (taken first: a thread that
            # would wait for the other's last product has the next task instead)
            gb = np.empty(f, dtype=x.dtype)
            tasks = [partial(conv_kernels.bias_grad, gmat, gb), *tasks]
        run_tasks(tasks)
        if deferred is not None:
            gw = deferred
        else:
            gw = weight_gradient()
            if target is not None:
                np.copyto(target, gw)
        if target is not None:
            gw = WRITTEN
        if need_gx:
            gx = data_grad()
            gx = gx if kernel_major else conv_windows.from_channels_last(gx, last)
        return (gx, gw) if gb is None else (gx, gw, gb)

    return apply_op(conv_windows.from_channels_last(out_l, last), inputs,  # type: ignore[arg-type]
                    backward)


def _finish_weight_gradient(tasks: list[Callable[[], Any]], weight_gradient: Callable[[], Any],
                            out: Any) -> None:
    """A deferred weight gradient: its partial products, their sum, into ``out``."""
    for task in tasks:
        task()
    np.copyto(out, weight_gradient())


def _kernel_major_product(x: Any, args: tuple[int, ...], wmat: Any, bias: Any | None,
                          out: Any, cols: Any | None = None) -> None:
    """One block of images' forward from channels-first ``x``: its kernel-major columns
    (into ``cols`` when given, kept for the backward), their product and the bias, in
    cache (one task)."""
    if cols is None:
        cols = np.empty((wmat.shape[1], out.shape[0]), dtype=x.dtype)
    conv_kernels.im2col_kernel_major(x, *args, cols)
    np.matmul(cols.T, wmat.T, out=out)
    if bias is not None:
        conv_kernels.add_bias(out, bias)


def _kernel_major_weight_tasks(x: Any, args: tuple[int, ...], gmat: Any, depth: int,
                               step: int, kept: list[Any] | None = None
                               ) -> tuple[list[Callable[[], Any]], Callable[[], Any]]:
    """The weight gradient ``cols @ gmat`` (depth = C·KK, F) of a forward that ran by
    blocks of ``step`` images: one task per block multiplies its columns (``kept[i]`` from
    the forward, else made again) into a partial product; the call that adds the partials
    up in block order once they ran (fixed by the shapes, like gemm.matmul_k's)."""
    n, per_image = x.shape[0], gmat.shape[0] // x.shape[0]
    starts = range(0, n, step)
    parts = np.empty((len(starts), depth, gmat.shape[1]), dtype=np.result_type(x, gmat))

    def block(i: int, n0: int) -> None:
        if kept is not None:
            cols = kept[i]
        else:
            cols = np.empty((depth, min(step, n - n0) * per_image), dtype=x.dtype)
            conv_kernels.im2col_kernel_major(x[n0:n0 + step], *args, cols)
        np.matmul(cols, gmat[n0 * per_image:(n0 + step) * per_image], out=parts[i])

    return [partial(block, i, n0) for i, n0 in enumerate(starts)], \
        partial(gemm.sum_in_order, parts)


def _columns_product(xl: Any, args: tuple[int, ...], wmat: Any, cols: Any, out: Any) -> None:
    """One block of images' forward: its im2col columns, then their product (one task)."""
    conv_kernels.im2col_rows(xl, *args, cols)
    np.matmul(cols, wmat.T, out=out)


def _input_gradient(gmat: Any, wmat: Any, shape: tuple[int, ...], args: tuple[int, ...],
                    kernel_major: bool) -> tuple[list[Callable[[], Any]], Callable[[], Any]]:
    """The data gradient of :func:`_compiled_convolution` (``shape``: its data as the column
    kernel reads it), one GEMM and one compiled scatter per block of images: the tasks, and
    the call that returns the gradient once they ran. A single block's GEMM is split into
    blocks of its own and its scatter runs afterwards, over all the threads."""
    n = shape[0]
    per_image = gmat.shape[0] // n
    step = _images_per_block(n, per_image, wmat.shape[1] * gmat.itemsize)
    gx = np.empty(shape, dtype=gmat.dtype)
    if step >= n:
        a, b = (wmat.T, gmat.T) if kernel_major else (gmat, wmat)
        gcols = np.empty((a.shape[0], b.shape[1]), dtype=gmat.dtype)
        scatter_all = conv_kernels.col2im_kernel_major if kernel_major else \
            conv_kernels.col2im_rows

        def finish() -> Any:
            scatter_all(gcols, *args, gx)
            return gx

        return gemm.matmul_tasks(a, b, gcols), finish

    # every block's column gradient in one buffer made here, not in the tasks: a task's
    # temporaries would come from whichever thread's malloc arena ran it, and arenas that
    # see other peaks from step to step map fresh pages (page faults) every step
    gcols = np.empty((wmat.shape[1], gmat.shape[0]) if kernel_major
                     else (gmat.shape[0], wmat.shape[1]), dtype=gmat.dtype)

    def scatter(n0: int) -> None:
        rows = slice(n0 * per_image, (n0 + step) * per_image)
        if kernel_major:
            np.matmul(wmat.T, gmat[rows].T, out=gcols[:, rows])
            conv_kernels.col2im_kernel_major(gcols[:, rows], *args, gx[n0:n0 + step])
        else:
            np.matmul(gmat[rows], wmat, out=gcols[rows])
            conv_kernels.col2im_rows(gcols[rows], *args, gx[n0:n0 + step])

    return [partial(scatter, n0) for n0 in range(0, n, step)], lambda: gx


Convolution = convolution
