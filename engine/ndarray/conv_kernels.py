"""Compiled copies of float32 2-D convolutions on numpy (numba): im2col, col2im, bias, and
the data-sized Winograd transforms.

The numpy im2col of :mod:`.conv_ops` costs three copies per layer forward (a padded
channels-last copy, the window gather, and for a channels-first network input a transpose
hidden in that gather, whose contiguous runs are only C = 3 floats long) and its backward a
zeroed padded buffer, one strided add per kernel position and a sliced view of the result.
On issue 11's CNN those copies cost about as much as the GEMMs they feed (3.4 ms of the
input layer's 5.8, 5.5 ms of the second layer's 17). Here each is one pass, with the padding
written as zeros on the way:

- :func:`im2col_rows` reads channels-last data (N, H, W, C), any strides, into
  ``cols`` (N·OH·OW, KH·KW·C) in (kh, kw, c) order: the layout of the numpy path, for data
  whose channels are contiguous in memory (every layer after the first, whose outputs are
  channels-last).
- :func:`im2col_kernel_major` reads channels-first data (N, C, H, W) into
  ``cols`` (C·KH·KW, N·OH·OW) in (c, kh, kw) order, which is the weight's own (F, C, KH, KW)
  order: the inner loop copies runs along W instead of 3-float runs, and the GEMM reads
  ``cols`` transposed (BLAS takes the transpose as a flag, no copy), its (rows, F) result
  still channels-last.
- :func:`col2im_rows` / :func:`col2im_kernel_major` are their transposes: they scatter the
  column gradient into a zeroed input gradient, one kernel window at a time, so the
  accumulated rows stay in L1.
- :func:`add_bias` / :func:`bias_grad`: numpy broadcasts over a (rows, 32) matrix one
  32-float row at a time (0.8 and 1.9 ms on the input layer); these take 0.1 and 0.25.
- ``winograd_*``: the four data-sized transforms of :mod:`.winograd`, fused per tile.

The scatter and gather loops are plain nested loops in a fixed order, so a result does not
depend on anything but the inputs (hybridized and imperative runs stay bit-identical). Each
kernel splits its work over the engine's threads (:mod:`.kernel_threads`) by rows of output
(gathers, transforms) or whole images (scatters, whose windows overlap only within an image);
the bias gradient keeps one float64 partial per fixed block of rows, added up in block order.
So every result is the same for any thread count.

>>> import numpy as np
>>> x = np.arange(4, dtype=np.float32).reshape(1, 2, 2, 1)
>>> cols = np.empty((9, 4), np.float32)   # 2x2 kernel, pad 1: 3x3 windows
>>> im2col_rows(x, 2, 2, 1, 1, 1, 1, 1, 1, 3, 3, cols)
>>> cols[4].tolist()   # the centre window holds the whole input
[0.0, 1.0, 2.0, 3.0]
"""

from __future__ import annotations

from typing import Any

import numpy

from .cpu_kernels import ENABLED, _jit, numba
from .kernel_threads import kernel, prange

# Indices are cast to unsigned before indexing: numba wraps negative indices, and that check
# in an inner loop keeps LLVM from vectorizing it (the kernel-major gather ran 7x slower).
_u = numba.uint64 if ENABLED else int


@_jit
def _valid_range(size: int, out: int, stride: int, offset: int) -> tuple[int, int]:
    """Output indices ``j`` in [lo, hi) whose input ``j·stride + offset`` lies in [0, size)."""
    lo = 0
    if offset < 0:
        lo = (-offset + stride - 1) // stride
    hi = 0
    if size - 1 - offset >= 0:
        hi = (size - 1 - offset) // stride + 1
    hi = min(hi, out)
    return lo, max(lo, hi)


@kernel
def im2col_rows(x: Any, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int, ph: int,
                pw: int, oh: int, ow: int, cols: Any) -> None:
    """Windows of channels-last ``x`` (N, H, W, C) into ``cols`` (N·OH·OW, KH·KW·C)."""
    n_, h_, w_, c_ = x.shape
    cu = _u(c_)
    for p in prange(n_ * oh):
        n, i = p // oh, p % oh
        for j in range(ow):
            dst = cols[_u((n * oh + i) * ow + j)]
            for a in range(kh):
                y = i * sh + a * dh - ph
                for b in range(kw):
                    base = _u((a * kw + b) * c_)
                    xx = j * sw + b * dw - pw
                    if 0 <= y < h_ and 0 <= xx < w_:
                        src = x[_u(n), _u(y), _u(xx)]
                        for c in range(cu):
                            dst[base + c] = src[c]
                    else:
                        for c in range(cu):
                            dst[base + c] = 0.0


@kernel
def col2im_rows(gcols: Any, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int, ph: int,
                pw: int, oh: int, ow: int, gx: Any) -> None:
    """Transpose of :func:`im2col_rows`: ``gx`` (N, H, W, C) = sum of the window gradients,
    one block per image."""
    n_, h_, w_, c_ = gx.shape
    cu = _u(c_)
    for n in prange(n_):
        gx[n] = 0.0
        for i in range(oh):
            for j in range(ow):
                r = _u((n * oh + i) * ow + j)
                for a in range(kh):
                    y = i * sh + a * dh - ph
                    if y < 0 or y >= h_:
                        continue
                    for b in range(kw):
                        xx = j * sw + b * dw - pw
                        if 0 <= xx < w_:
                            base = _u((a * kw + b) * c_)
                            for c in range(cu):
                                gx[_u(n), _u(y), _u(xx), c] += gcols[r, base + c]


@kernel
def im2col_kernel_major(x: Any, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int,
                        ph: int, pw: int, oh: int, ow: int, cols: Any) -> None:
    """Windows of channels-first ``x`` (N, C, H, W) into ``cols`` (C·KH·KW, N·OH·OW), one
    block per (row of ``cols``, image)."""
    n_, c_, h_, w_ = x.shape
    for p in prange(c_ * kh * kw * n_):
        k, n = p // n_, p % n_
        c, a, b = k // (kh * kw), (k // kw) % kh, k % kw
        off = b * dw - pw
        lo, hi = _valid_range(w_, ow, sw, off)
        row = cols[_u(k)]
        for i in range(oh):
            base = _u((n * oh + i) * ow)
            y = i * sh + a * dh - ph
            if y < 0 or y >= h_:
                for j in range(_u(ow)):
                    row[base + j] = 0.0
                continue
            src = x[_u(n), _u(c), _u(y)]
            for j in range(_u(lo)):
                row[base + j] = 0.0
            for j in range(_u(lo), _u(hi)):
                row[base + j] = src[j * _u(sw) + _u(off + lo * sw) - _u(lo * sw)]
            for j in range(_u(hi), _u(ow)):
                row[base + j] = 0.0


@kernel
def col2im_kernel_major(gcols: Any, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int,
                        ph: int, pw: int, oh: int, ow: int, gx: Any) -> None:
    """Transpose of :func:`im2col_kernel_major` into ``gx`` (N, C, H, W), one block per
    (image, channel) plane."""
    n_, c_, h_, w_ = gx.shape
    for p in prange(n_ * c_):
        n, c = p // c_, p % c_
        gx[n, c] = 0.0
        for a in range(kh):
            for b in range(kw):
                off = b * dw - pw
                lo, hi = _valid_range(w_, ow, sw, off)
                row = gcols[_u((c * kh + a) * kw + b)]
                for i in range(oh):
                    y = i * sh + a * dh - ph
                    if y < 0 or y >= h_:
                        continue
                    base = _u((n * oh + i) * ow)
                    dst = gx[_u(n), _u(c), _u(y)]
                    for j in range(_u(lo), _u(hi)):
                        dst[j * _u(sw) + _u(off + lo * sw) - _u(lo * sw)] += row[base + j]


# rows per block of add_bias and bias_grad (bias_grad keeps one partial sum per block)
BIAS_BLOCK_ROWS = 2048


@kernel
def add_bias(out: Any, bias: Any) -> None:
    """``out += bias`` over the rows of ``out`` (rows, F) (numpy's broadcast add loops over
    F-long rows one at a time: 5x slower for F = 32)."""
    rows, f = out.shape
    fu = _u(f)
    for blk in prange((rows + BIAS_BLOCK_ROWS - 1) // BIAS_BLOCK_ROWS):
        for r in range(blk * BIAS_BLOCK_ROWS, min(rows, (blk + 1) * BIAS_BLOCK_ROWS)):
            for j in range(fu):
                out[r, j] += bias[j]


@kernel
def bias_grad(g: Any, out: Any) -> None:
    """Column sums of ``g`` (rows, F) into ``out`` (F,), accumulated in float64: in row order
    within each block of BIAS_BLOCK_ROWS rows, then the blocks' sums in block order (numpy's
    ``sum(axis=0)`` of a narrow matrix runs 5-10x slower)."""
    rows, f = g.shape
    fu = _u(f)
    blocks = (rows + BIAS_BLOCK_ROWS - 1) // BIAS_BLOCK_ROWS
    acc = numpy.zeros((blocks, f), dtype=numpy.float64)
    for blk in prange(blocks):
        for r in range(blk * BIAS_BLOCK_ROWS, min(rows, (blk + 1) * BIAS_BLOCK_ROWS)):
            for j in range(fu):
                acc[blk, j] += g[r, j]
    for j in range(fu):
        total = 0.0
        for blk in range(blocks):
            total += acc[blk, j]
        out[j] = total


@_jit
def gather_tile(x: Any, n: int, y0: int, x0: int, tile: Any) -> None:
    """``tile`` (A, B, C) = the A x B window of image ``n`` of channels-last ``x`` (N, H, W, C)
    whose corner is (y0, x0), zeros where it lies outside the image."""
    h_, w_, c_ = x.shape[1], x.shape[2], x.shape[3]
    cu = _u(c_)
    for a in range(tile.shape[0]):
        y = y0 + a
        for b in range(tile.shape[1]):
            xx = x0 + b
            if 0 <= y < h_ and 0 <= xx < w_:
                src = x[_u(n), _u(y), _u(xx)]
                for c in range(cu):
                    tile[a, b, c] = src[c]
            else:
                for c in range(cu):
                    tile[a, b, c] = 0.0


@kernel
def winograd_input_transform(x: Any, ph: int, pw: int, v: Any) -> None:
    """Winograd F(2x2, 3x3)'s ``V = Bᵀ d B`` for every 4x4 tile ``d`` (stride 2) of
    channels-last ``x`` (N, H, W, C) padded by (ph, pw) zeros, into v (4, 4, N, TH, TW, C);
    the same adds in the same order as :func:`engine.ndarray.winograd._input_transform`
    (so the same floats), without the padded copy and the full-size temporary."""
    n_, c_ = x.shape[0], x.shape[3]
    th, tw = v.shape[3], v.shape[4]
    cu = _u(c_)
    for p in prange(n_ * th):  # one block per row of tiles
        n, ty = p // th, p % th
        d = numpy.zeros((4, 4, c_), dtype=x.dtype)
        t = numpy.empty((4, 4, c_), dtype=x.dtype)
        for tx in range(tw):
            gather_tile(x, n, 2 * ty - ph, 2 * tx - pw, d)
            for b in range(4):
                for c in range(cu):
                    t[0, b, c] = d[0, b, c] - d[2, b, c]
                    t[1, b, c] = d[1, b, c] + d[2, b, c]
                    t[2, b, c] = d[2, b, c] - d[1, b, c]
                    t[3, b, c] = d[1, b, c] - d[3, b, c]
            un, uy, ux = _u(n), _u(ty), _u(tx)
            for a in range(4):
                for c in range(cu):
                    v[a, 0, un, uy, ux, c] = t[a, 0, c] - t[a, 2, c]
                    v[a, 1, un, uy, ux, c] = t[a, 1, c] + t[a, 2, c]
                    v[a, 2, un, uy, ux, c] = t[a, 2, c] - t[a, 1, c]
                    v[a, 3, un, uy, ux, c] = t[a, 1, c] - t[a, 3, c]


@kernel
def winograd_output_transform(m: Any, bias: Any, use_bias: bool, out: Any) -> None:
    """``Y = Aᵀ M A`` for every tile of m (4, 4, N, TH, TW, F) into out (N, 2TH, 2TW, F),
    plus ``bias``: the adds of :func:`engine.ndarray.winograd._output_transform` in the same
    order, then the bias, in one pass."""
    th, tw, f_ = m.shape[3], m.shape[4], m.shape[5]
    fu = _u(f_)
    for p in prange(m.shape[2] * th):  # one block per row of tiles
        n, ty = p // th, p % th
        un = _u(n)
        s = numpy.empty((2, 4, f_), dtype=m.dtype)
        for tx in range(tw):
            uy, ux = _u(ty), _u(tx)
            for b in range(4):
                for j in range(fu):
                    s[0, b, j] = m[0, b, un, uy, ux, j] + m[1, b, un, uy, ux, j]
                    s[0, b, j] += m[2, b, un, uy, ux, j]
                    s[1, b, j] = m[1, b, un, uy, ux, j] - m[2, b, un, uy, ux, j]
                    s[1, b, j] -= m[3, b, un, uy, ux, j]
            for a in range(2):
                y = _u(2 * ty + a)
                for j in range(fu):
                    o0 = s[a, 0, j] + s[a, 1, j]
                    o0 += s[a, 2, j]
                    o1 = s[a, 1, j] - s[a, 2, j]
                    o1 -= s[a, 3, j]
                    if use_bias:
                        o0 += bias[j]
                        o1 += bias[j]
                    out[un, y, _u(2 * tx), j] = o0
                    out[un, y, _u(2 * tx + 1), j] = o1


@kernel
def winograd_grad_transform(gl: Any, gy: Any) -> None:
    """``Gy = A dY Aᵀ`` for every 2x2 block of gl (N, 2TH, 2TW, F) into gy (4, 4, N, TH, TW,
    F): the ops of :func:`engine.ndarray.winograd._grad_transform` (the same floats)."""
    th, tw, f_ = gy.shape[3], gy.shape[4], gy.shape[5]
    fu = _u(f_)
    for p in prange(gy.shape[2] * th):  # one block per row of tiles
        n, ty = p // th, p % th
        un = _u(n)
        t = numpy.empty((4, 2, f_), dtype=gy.dtype)
        for tx in range(tw):
            uy, ux = _u(ty), _u(tx)
            for b in range(2):
                y0, y1, xx = _u(2 * ty), _u(2 * ty + 1), _u(2 * tx + b)
                for j in range(fu):
                    d0 = gl[un, y0, xx, j]
                    d1 = gl[un, y1, xx, j]
                    t[0, b, j] = d0
                    t[1, b, j] = d0 + d1
                    t[2, b, j] = d0 - d1
                    t[3, b, j] = -d1
            for a in range(4):
                for j in range(fu):
                    gy[a, 0, un, uy, ux, j] = t[a, 0, j]
                    gy[a, 1, un, uy, ux, j] = t[a, 0, j] + t[a, 1, j]
                    gy[a, 2, un, uy, ux, j] = t[a, 0, j] - t[a, 1, j]
                    gy[a, 3, un, uy, ux, j] = -t[a, 1, j]


@kernel
def winograd_input_grad(dv: Any, ph: int, pw: int, gx: Any) -> None:
    """``gx = Σ B dV Bᵀ`` over the overlapping 4x4 tiles of dv (4, 4, N, TH, TW, C) into the
    unpadded data gradient gx (N, H, W, C): tile by tile, each tile's 4x4 block added where
    it lies inside the data (no padded buffer, no fold passes). The sums run in tile order,
    not in the numpy fold's order: the floats differ from it in the last bits. One block
    per image (tiles overlap only within one)."""
    n_, h_, w_, c_ = gx.shape
    th, tw = dv.shape[3], dv.shape[4]
    cu = _u(c_)
    for n in prange(n_):
        gx[n] = 0.0
        r = numpy.empty((4, 4, c_), dtype=gx.dtype)
        e = numpy.empty((4, c_), dtype=gx.dtype)
        un = _u(n)
        for ty in range(th):
            for tx in range(tw):
                uy, ux = _u(ty), _u(tx)
                # rows: B's rows are (1, 0, 0, 0), (0, 1, -1, 1), (-1, 1, 1, 0), (0, 0, 0, -1)
                for b in range(4):
                    for c in range(cu):
                        v0 = dv[0, b, un, uy, ux, c]
                        v1 = dv[1, b, un, uy, ux, c]
                        v2 = dv[2, b, un, uy, ux, c]
                        v3 = dv[3, b, un, uy, ux, c]
                        r[0, b, c] = v0
                        r[1, b, c] = v1 - v2 + v3
                        r[2, b, c] = v1 + v2 - v0
                        r[3, b, c] = -v3
                for a in range(4):
                    y = 2 * ty + a - ph
                    if y < 0 or y >= h_:
                        continue
                    for c in range(cu):
                        e[0, c] = r[a, 0, c]
                        e[1, c] = r[a, 1, c] - r[a, 2, c] + r[a, 3, c]
                        e[2, c] = r[a, 1, c] + r[a, 2, c] - r[a, 0, c]
                        e[3, c] = -r[a, 3, c]
                    for b in range(4):
                        xx = 2 * tx + b - pw
                        if 0 <= xx < w_:
                            for c in range(cu):
                                gx[un, _u(y), _u(xx), c] += e[b, c]


# ------------------------------------------------------------------- filter transforms
# A Winograd layer takes its filters to the transform domain, U = G w Gᵀ per (filter,
# channel) pair, and its filter gradient back, dw = Gᵀ dU G (G: m x 3, m = 4 for F(2x2), 6
# for F(4x4)). As one BLAS call, (m², 9) @ (9, F·C), OpenBLAS runs a product with an inner
# dimension of 9 at ~20 GFLOP/s on one thread (2.2 ms for F(4x4)'s 256x256 filters). These
# do it separably (162 multiply-adds per pair instead of 324) from and to the filters as
# (F, C, 9) with any strides (the weight as stored, or a view of its rows), vectorized along
# C, each sum in a fixed order, split over the engine's threads by blocks of filters
# (independent outputs); they are bound by writing U.
_FILTER_BLOCK = 16


@kernel
def filter_transform(w: Any, g: Any, u: Any) -> None:
    """``u[i·m + j, f, c] = Σ_s g[j, s]·(Σ_r g[i, r]·w[f, c, 3r + s])`` for filters w
    (F, C, 9), any strides (MXNet's stored (F, C, 3, 3) as it is, or a view of the rows
    (F, 3, 3, C) of a channels-last weight), and g (m, 3), into u (m², F, C).

    Each filter's taps are first gathered into a small (9, C) buffer, so the arithmetic
    runs along contiguous channels whatever w's layout: the transposing copy of the whole
    weight that used to come first (2.4 MB read and written for 256x256 filters) is gone."""
    f_, c_ = w.shape[0], w.shape[1]
    m = g.shape[0]
    cu = _u(c_)
    for blk in prange((f_ + _FILTER_BLOCK - 1) // _FILTER_BLOCK):
        f0 = blk * _FILTER_BLOCK
        tmp = numpy.empty((m, 3, c_), dtype=u.dtype)  # G w, the first half
        taps = numpy.empty((9, c_), dtype=w.dtype)
        for f in range(f0, min(f_, f0 + _FILTER_BLOCK)):
            uf = _u(f)
            for c in range(cu):
                src = w[uf, c]
                for t in range(9):
                    taps[_u(t), c] = src[t]
            for i in range(m):
                a0, a1, a2 = g[i, 0], g[i, 1], g[i, 2]
                for s in range(3):
                    row = tmp[i, s]
                    for c in range(cu):
                        row[c] = (a0 * taps[_u(s), c] + a1 * taps[_u(3 + s), c]
                                  + a2 * taps[_u(6 + s), c])
            for i in range(m):
                t0, t1, t2 = tmp[i, 0], tmp[i, 1], tmp[i, 2]
                for j in range(m):
                    b0, b1, b2 = g[j, 0], g[j, 1], g[j, 2]
                    dst = u[_u(i * m + j), uf]
                    for c in range(cu):
                        dst[c] = b0 * t0[c] + b1 * t1[c] + b2 * t2[c]


@kernel
def filter_transform_grad(du: Any, g: Any, out: Any) -> None:
    """``out[f, c, 3r + s] = Σ_i g[i, r]·(Σ_j g[j, s]·du[i·m + j, f, c])`` for du (m², F, C):
    a filter gradient from the transform domain straight into the weight's layout, ``out``
    (F, C, 9) with any strides (MXNet's (F, C, 3, 3), or a view of channels-last rows).
    Each filter's 9 taps are computed along contiguous channels in a small buffer first."""
    f_, c_ = du.shape[1], du.shape[2]
    m = g.shape[0]
    cu = _u(c_)
    for blk in prange((f_ + _FILTER_BLOCK - 1) // _FILTER_BLOCK):
        f0 = blk * _FILTER_BLOCK
        tmp = numpy.empty((m, 3, c_), dtype=out.dtype)
        taps = numpy.empty((9, c_), dtype=out.dtype)
        for f in range(f0, min(f_, f0 + _FILTER_BLOCK)):
            uf = _u(f)
            for i in range(m):
                for s in range(3):
                    row = tmp[i, s]
                    b = g[0, s]
                    src = du[_u(i * m), uf]
                    for c in range(cu):
                        row[c] = b * src[c]
                    for j in range(1, m):
                        b = g[j, s]
                        src = du[_u(i * m + j), uf]
                        for c in range(cu):
                            row[c] += b * src[c]
            for r in range(3):
                for s in range(3):
                    dst = taps[_u(3 * r + s)]
                    a = g[0, r]
                    for c in range(cu):
                        dst[c] = a * tmp[0, s, c]
                    for i in range(1, m):
                        a = g[i, r]
                        for c in range(cu):
                            dst[c] += a * tmp[i, s, c]
            for c in range(cu):
                target = out[uf, c]
                for t in range(9):
                    target[t] = taps[_u(t), c]


@kernel(rows=("tap", "gw2"))
def tap_gradient(tap: Any, offset: int, step: int, gw2: Any) -> None:
    """A weight gradient that is zero but for one kernel position, in one pass per filter:
    row ``f`` of ``gw2`` (F, KK·C) zeroed, then ``gw2[f, offset + c·step] = tap[f, c]``
    (channels-first weights: offset k, step KK; channels-last: offset k·C, step 1). Zeroing
    the whole weight with numpy and then assigning the tap through a strided view took 0.68
    ms for a 512x512x3x3 weight, one thread; this 0.47, about what zeroing alone takes."""
    f_, c_ = tap.shape
    width = gw2.shape[1]
    for f in prange(f_):
        row = gw2[f]
        for i in range(width):
            row[i] = 0
        src = tap[f]
        for c in range(c_):
            row[_u(offset + c * step)] = src[c]


# Filters per block of taps_transposed: a block's reads (16 filters x 16 channels x 9 taps)
# stay in L1 while its 9 x 16 rows of 16 filters are written, whole cache lines each.
_TRANSPOSE_BLOCK = 16


@kernel
def taps_transposed(w3: Any, out: Any) -> None:
    """``out[k, c, f] = w3[f, c, k]``: 3x3 filters (F, C, 9) as the (9, C, F) operand of
    F(4x4)'s forward filter product, in blocks of filters and channels. numpy's transposing
    copy took 1.5 ms for 256x256 filters (one thread, Sapphire Rapids VM), this 0.53 ms
    (blocks of 8, 32 or 64 were slower)."""
    f_, c_, k_ = w3.shape
    for fb in prange((f_ + _TRANSPOSE_BLOCK - 1) // _TRANSPOSE_BLOCK):
        f0 = fb * _TRANSPOSE_BLOCK
        f1 = min(f_, f0 + _TRANSPOSE_BLOCK)
        for c0 in range(0, c_, _TRANSPOSE_BLOCK):
            for k in range(k_):
                for c in range(c0, min(c_, c0 + _TRANSPOSE_BLOCK)):
                    row = out[k, c]
                    for f in range(f0, f1):
                        row[f] = w3[f, c, k]
