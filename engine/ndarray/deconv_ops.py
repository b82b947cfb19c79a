"""N-d transposed convolution (MXNet's ``Deconvolution``): the gradient of a convolution
with respect to its input, run forward.

Forward is one GEMM per group, ``x @ weight`` → (rows, kernel positions × filters), and a
col2im scatter onto the output canvas; backward reads the output gradient through the
convolution's window view (im2col) and runs two GEMMs. Channels-last throughout, as in
:mod:`.conv_ops`.

>>> from engine import nd
>>> x = nd.ones((1, 4, 5, 5)); w = nd.ones((4, 3, 3, 3))
>>> nd.Deconvolution(x, w, kernel=(3, 3), stride=(2, 2), adj=(1, 1), num_filter=3,
...                  no_bias=True).shape
(1, 3, 12, 12)
"""

from __future__ import annotations

from typing import Any

from . import conv_windows
from .conv_ops import group_matrix, grouped_matmul, kernel_major_product, ungroup_matrix
from .ndarray import NDArray, apply_op, needs_grad


def _pads(sizes: tuple[int, ...], kernel: tuple[int, ...], stride: tuple[int, ...],
          dilate: tuple[int, ...], pad: tuple[int, ...], adj: tuple[int, ...],
          target_shape: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(pad, adj); a ``target_shape`` replaces both, as MXNet infers them from it."""
    if target_shape in (None, ()) or not any(int(t) for t in target_shape):
        return pad, adj
    target = conv_windows.spatial_tuple(target_shape, len(sizes), "target_shape")
    pads, adjs = [], []
    for n, k, s, d, t in zip(sizes, kernel, stride, dilate, target, strict=True):
        full = s * (n - 1) + d * (k - 1) + 1
        if full < t:
            raise ValueError(f"Deconvolution: target_shape {target} is larger than the "
                             f"largest output {full} of input size {n}")
        pads.append((full - t + 1) // 2)
        adjs.append((full - t) % 2)
    return tuple(pads), tuple(adjs)


def deconvolution(data: NDArray, weight: NDArray, bias: NDArray | None = None,
                  kernel: Any = None, stride: Any = (), dilate: Any = (), pad: Any = (),
                  adj: Any = (), target_shape: Any = (), num_filter: int | None = None,
                  num_group: int = 1, workspace: int = 512, no_bias: bool = True,
                  cudnn_tune: Any = None, cudnn_off: bool = False, layout: str | None = None,
                  **_: Any) -> NDArray:
    """Transposed convolution of ``data`` (N, C, *spatial) with ``weight``
    (C, num_filter/num_group, *kernel); channels-last layouts take (N, *spatial, C) and a
    (C, *kernel, num_filter/num_group) weight. Output size per dim:
    ``stride·(in-1) + dilate·(kernel-1) + 1 - 2·pad + adj``.
    """
    x, w = data._data, weight._data
    xp = data.xp
    nd = x.ndim - 2
    if nd not in (1, 2, 3) or w.ndim != x.ndim:
        raise ValueError(f"Deconvolution expects 3-, 4- or 5-D data and a weight of the same "
                         f"rank, got shapes {x.shape} and {w.shape}")
    last = conv_windows.check_layout(layout, nd, "Deconvolution")
    w_kernel, fg = (w.shape[1:-1], w.shape[-1]) if last else (w.shape[2:], w.shape[1])
    kernel = conv_windows.spatial_tuple(kernel if kernel not in (None, ()) else w_kernel, nd,
                                  "kernel")
    stride = conv_windows.spatial_tuple(stride, nd, "stride", 1)
    dilate = conv_windows.spatial_tuple(dilate, nd, "dilate", 1)
    groups = int(num_group)
    xl = conv_windows.to_channels_last(x, last)
    n, c, sizes = x.shape[0], xl.shape[-1], tuple(xl.shape[1:-1])
    pad, adj = _pads(sizes, kernel, stride, dilate, conv_windows.spatial_tuple(pad, nd, "pad", 0),
                     conv_windows.spatial_tuple(adj, nd, "adj", 0), target_shape)
    f = fg * groups
    if tuple(w_kernel) != kernel or w.shape[0] != c or groups < 1 or c % groups:
        raise ValueError(f"Deconvolution: weight {w.shape} does not fit data with {c} channels,"
                         f" kernel {kernel} and num_group={groups}; expected "
                         f"(channels, num_filter/num_group, *kernel)")
    if num_filter is not None and f != int(num_filter):
        raise ValueError(f"Deconvolution: weight gives {f} filters, num_filter={num_filter}")
    out_sizes = tuple(s * (i - 1) + d * (k - 1) + 1 - 2 * p + a for i, k, s, d, p, a in
                      zip(sizes, kernel, stride, dilate, pad, adj, strict=True))
    if min(out_sizes) <= 0:
        raise ValueError(f"Deconvolution: pad {pad} leaves no output for input {sizes}")
    # the canvas holds every cell a window writes, and the output (adj may reach past it)
    canvas = tuple(max(s * (i - 1) + d * (k - 1) + 1, p + o) for i, k, s, d, p, o in
                   zip(sizes, kernel, stride, dilate, pad, out_sizes, strict=True))
    rows, kk = n * conv_windows.count(sizes), conv_windows.count(kernel)
    xmat = group_matrix(xp, xl.reshape(rows, 1, c), groups)  # (G, rows, C/G)
    # weight as (G, C/G, KK·F/G) in (kernel, filter) order, matching channels-last columns
    wl = w if last else w.transpose(0, *range(2, w.ndim), 1)
    wmat = wl.reshape(groups, c // groups, kk * fg)
    cols = kernel_major_product(xp, xmat, wmat, kk)  # (KK, rows, F)
    full = xp.zeros((n, *canvas, f), dtype=x.dtype)
    conv_windows.col2im_add(full, cols.reshape(kk, n, *sizes, f), sizes, kernel, stride, dilate)
    out_l = full[conv_windows.interior(pad, out_sizes)]
    use_bias = bias is not None and not no_bias
    if use_bias:
        out_l = out_l + bias._data.astype(x.dtype, copy=False)  # type: ignore[union-attr]
    inputs = (data, weight, bias) if use_bias else (data, weight)
    need_gx = needs_grad(data)

    def backward(g: Any) -> tuple[Any, ...]:
        g_l = conv_windows.to_channels_last(g, last)
        gfull = conv_windows.pad_channels_last(
            xp, g_l, pad, tuple(cv - p - o for cv, p, o in zip(canvas, pad, out_sizes,
                                                               strict=True)))
        win = conv_windows.windows(xp, gfull, sizes, kernel, stride, dilate)
        gcols = group_matrix(xp, xp.ascontiguousarray(win).reshape(rows, kk, f), groups)
        gw = grouped_matmul(xp, xmat.transpose(0, 2, 1), gcols)  # (G, C/G, KK·F/G)
        gw = gw.reshape(c, *kernel, fg)
        if not last:
            gw = gw.transpose(0, nd + 1, *range(1, nd + 1))
        gx = None
        if need_gx:
            gx_mat = grouped_matmul(xp, gcols, wmat.transpose(0, 2, 1))  # (G, rows, C/G)
            gx_l = ungroup_matrix(xp, gx_mat, 1).reshape(n, *sizes, c)
            gx = conv_windows.from_channels_last(gx_l, last)
        if use_bias:
            return gx, gw, g_l.sum(axis=tuple(range(nd + 1)))
        return gx, gw

    return apply_op(conv_windows.from_channels_last(out_l, last), inputs,  # type: ignore[arg-type]
                    backward)


Deconvolution = deconvolution
