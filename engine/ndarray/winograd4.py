"""Winograd F(4x4, 3x3) for 3x3, stride-1, undilated, ungrouped 2-D convolutions (numba).

The larger sibling of :mod:`.winograd`'s F(2x2, 3x3): each 6x6 input tile (stride 4) gives
a 4x4 block of outputs from 36 transform-domain products per (input, output) channel pair,
where im2col needs 144 and F(2x2) 64 (four 2x2 blocks of 16): 1.78x fewer multiply-adds
than F(2x2), and the transformed data is 2.25 values per output pixel instead of 4, so the
transforms stream less memory too. The algebra is the same (Lavin & Gray 2015), with the
interpolation points 0, ±1, ±2 and infinity:

- forward: ``V = Bᵀ d B`` per tile, ``U = G w Gᵀ`` per filter, ``M[k] = V[k] @ U[k]ᵀ`` for
  the 36 points k (channel GEMMs), ``Y = Aᵀ M A``;
- backward, its exact transpose: ``dM = A dY Aᵀ``; weight ``dU[k] = dM[k]ᵀ @ V[k]``,
  ``dw = Gᵀ dU G``; data ``dV[k] = dM[k] @ U[k]``, ``dd = B dV Bᵀ`` added into the
  overlapping tiles.

The transforms' entries (up to 8 in A, 5 in B, 1/24 in G) cost float32 accuracy: errors
against a float64 reference, relative to each result's largest magnitude, measured up to
6e-6 (F(2x2) 4e-7, im2col 2e-7; tests/engine/ndarray/test_winograd4.py bounds them at
2e-5); float64 results equal im2col's to 1e-14. Every data-sized transform is one compiled
pass per tile with the channels innermost (vectorized), padding read as zeros and a partial
last tile cropped, so any output size works. The loops run in a fixed order: results depend
on the inputs only (hybridized and imperative runs stay bit-identical).

Only where the compiled kernels apply (numba, numpy float32/float64); the cupy path keeps
im2col and the numpy-only path F(2x2).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from . import gemm, winograd
from .conv_kernels import gather_tile
from .cpu_kernels import ENABLED, _jit, numba
from .kernel_threads import kernel, prange, run_tasks

_u = numba.uint64 if ENABLED else int

# Bᵀ (6x6): data tile → transform domain
_BT = np.array([[4.0, 0.0, -5.0, 0.0, 1.0, 0.0],
                [0.0, -4.0, -4.0, 1.0, 1.0, 0.0],
                [0.0, 4.0, -4.0, -1.0, 1.0, 0.0],
                [0.0, -2.0, -1.0, 2.0, 1.0, 0.0],
                [0.0, 2.0, -1.0, -2.0, 1.0, 0.0],
                [0.0, 4.0, 0.0, -5.0, 0.0, 1.0]])
# G (6x3): 3-tap filter → transform domain (1/6, 1/12, 1/24: rounded in float32)
_G = np.array([[1 / 4, 0.0, 0.0],
               [-1 / 6, -1 / 6, -1 / 6],
               [-1 / 6, 1 / 6, -1 / 6],
               [1 / 24, 1 / 12, 1 / 6],
               [1 / 24, -1 / 12, 1 / 6],
               [0.0, 0.0, 1.0]])
# Aᵀ (4x6): transform domain → 4 outputs
_AT = np.array([[1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
                [0.0, 1.0, -1.0, 2.0, -2.0, 0.0],
                [0.0, 1.0, 1.0, 4.0, 4.0, 0.0],
                [0.0, 1.0, -1.0, 8.0, -8.0, 1.0]])
# its filter transforms (U, Uᵀ and dw), with G ⊗ G made once
_FILTERS = winograd.FilterTransform(_G)

# Fewest 6x6 tiles (N·⌈OH/4⌉·⌈OW/4⌉) for this path over F(2x2): below it the filter
# transforms, 36·F·C values each way, outweigh the data's (bench/conv_paths.py, 1 thread:
# ResNet-18's 256-channel 8x8 maps at batch 16, 64 tiles, ran 1.2x faster than F(2x2);
# its 512-channel 4x4 maps, 16 tiles, 1.1x slower than im2col and 1.2x than F(2x2)).
MIN_TILES = 64 if winograd.WINOGRAD == "4x4" else 10 ** 9  # see RUDDER_ENGINE_WINOGRAD


def available(*arrays: Any) -> bool:
    """Whether this path can run on ``arrays``: numba, numpy, one float dtype (32 or 64)."""
    if not ENABLED:
        return False
    dtype = arrays[0].dtype
    return dtype in (np.float32, np.float64) and all(
        type(a) is np.ndarray and a.dtype == dtype for a in arrays)


def applies(xl: Any, filters: Any, pad: tuple[int, ...]) -> bool:
    """Whether a convolution that the Winograd path takes (see :func:`.winograd.applies`)
    runs as F(4x4, 3x3): compiled kernels for its arrays, and at least MIN_TILES tiles."""
    return available(xl, filters) and tile_count(xl.shape, pad) >= MIN_TILES


class Plan(winograd.Plan):
    """Shapes of one convolution, in 4x4 output blocks (6x6 input tiles)."""

    def __init__(self, shape: tuple[int, ...], filters: int, pad: tuple[int, ...]) -> None:
        super().__init__(shape, filters, pad, block=4)


def tile_count(shape: tuple[int, ...], pad: tuple[int, ...]) -> int:
    """6x6 tiles of a (N, H, W, C) convolution's output, 4x4 outputs each."""
    n, h, w, _ = shape
    return n * ((h + 2 * pad[0] + 1) // 4) * ((w + 2 * pad[1] + 1) // 4)


# ------------------------------------------------------------------ compiled transforms
# Each 1-D transform is written out with shared partial sums (the rows of Bᵀ, Aᵀ, A and B
# above), applied to 6 (or 4) values at a time; a 2-D transform applies it along one axis of
# the tile and then the other, for one channel at a time in the innermost loop (vectorized).
# Multiples are sums (x2 = a + a is exact, as is 5a = 4a + a rounded once), so the arithmetic
# stays in the data's dtype: a float literal would promote float32 to float64 in numba.
@_jit
def _x4(a: Any) -> Any:
    b = a + a
    return b + b


@_jit
def _bt6(d0: Any, d1: Any, d2: Any, d3: Any, d4: Any, d5: Any) -> Any:
    """Bᵀ·d for a 6-vector."""
    q1, q2, q3 = _x4(d1), _x4(d2), _x4(d3)
    t1 = d4 - q2
    t2 = d3 - q1
    t3 = d4 - d2
    t4 = d3 - d1
    t4 = t4 + t4
    return (_x4(d0) - (q2 + d2) + d4, t1 + t2, t1 - t2, t3 + t4, t3 - t4,
            q1 - (q3 + d3) + d5)


@_jit
def _b6(v0: Any, v1: Any, v2: Any, v3: Any, v4: Any, v5: Any) -> Any:
    """B·v for a 6-vector (the transpose of :func:`_bt6`)."""
    s12 = v2 - v1
    s34 = v4 - v3
    q0 = _x4(v0)
    return (q0, _x4(s12 + v5) + (s34 + s34), -(q0 + v0) - _x4(v1 + v2) - v3 - v4,
            -s12 - (s34 + s34) - (_x4(v5) + v5), v0 + v1 + v2 + v3 + v4, v5)


@_jit
def _at6(m0: Any, m1: Any, m2: Any, m3: Any, m4: Any, m5: Any) -> Any:
    """Aᵀ·m: 6 transform points → 4 outputs."""
    s12, d12 = m1 + m2, m1 - m2
    s34, d34 = m3 + m4, m3 - m4
    d34x2 = d34 + d34
    return (m0 + s12 + s34, d12 + d34x2, s12 + _x4(s34), d12 + _x4(d34x2) + m5)


@_jit
def _a4(y0: Any, y1: Any, y2: Any, y3: Any) -> Any:
    """A·y: 4 output gradients → 6 transform points (the transpose of :func:`_at6`)."""
    e, o = y0 + y2, y1 + y3
    y3x2 = y3 + y3
    e4, o4 = y0 + _x4(y2), (y1 + y1) + _x4(y3x2)
    return (y0, e + o, e - o, e4 + o4, e4 - o4, y3)


# Fewest tiles a transform kernel handles as one block (whole rows of tiles): see below.
BLOCK_TILES = 8


@_jit
def _block_rows(tw: int) -> int:
    """Rows of ``tw`` tiles per block: at least BLOCK_TILES tiles (fixed by the shape)."""
    return max(1, (BLOCK_TILES + tw - 1) // tw)


@_jit
def _move_planes(planes: Any, t0: int, buf: Any, into_planes: bool) -> None:
    """A block's tiles between the 36 planes and its tile-major buffer: ``planes[k, t0 + q]
    = buf[q, k]`` when ``into_planes``, else the other way."""
    nt, ch = buf.shape[0], _u(buf.shape[2])
    for k in range(36):
        for q in range(nt):
            plane_row = planes[_u(k), _u(t0 + q)]
            buf_row = buf[_u(q), _u(k)]
            if into_planes:
                for c in range(ch):
                    plane_row[c] = buf_row[c]
            else:
                for c in range(ch):
                    buf_row[c] = plane_row[c]


# In the four kernels below the channel loop is the innermost one, with the 1-D transform
# inlined as straight-line code in it, so that LLVM vectorizes it across channels (a channel
# loop around the 6x6 loops ran 5-12x slower, unvectorized). The engine's threads share
# them by blocks of whole rows of tiles (the data gradient, whose tiles overlap, by images):
# each block writes only its own outputs, so the floats do not depend on the thread count.
#
# The transform domain is stored as 36 planes (36, tiles, C), the layout the channel GEMMs
# want; but one tile touches all 36, C values in each, and writing (or reading) 36 streams
# of 128-256 bytes at once ran 2-3x slower than memory allows (worse with two threads, whose
# streams then interleave). So each block transforms its tiles into a small tile-major
# buffer (tiles, 36, C) in cache and moves it to (or from) the planes in one pass, plane by
# plane, in runs of the block's tiles: measured here, the data-gradient transform of a
# (64, 16, 16, 64) map went from 5.0 to 2.2 ms on one thread and from 2.3 to 0.9 on two.
# The arithmetic is unchanged: the same floats. (F(2x2)'s 16 planes, engine.ndarray.
# conv_kernels, gained nothing from the same blocks: its kernels write each tile directly.)
@kernel
def _input_transform(x: Any, ph: int, pw: int, th: int, tw: int, v: Any) -> None:
    """``V = Bᵀ d B`` for every 6x6 tile d (stride 4) of channels-last x (N, H, W, C)
    padded by (ph, pw) zeros, into v (36, N·TH·TW, C)."""
    n_, c_ = x.shape[0], x.shape[3]
    cu = _u(c_)
    rows, rb = n_ * th, _block_rows(tw)
    for blk in prange((rows + rb - 1) // rb):
        p0 = blk * rb
        p1 = min(rows, p0 + rb)
        buf = np.empty(((p1 - p0) * tw, 36, c_), dtype=v.dtype)
        d = np.zeros((6, 6, c_), dtype=x.dtype)
        t = np.empty((6, 6, c_), dtype=x.dtype)
        for p in range(p0, p1):
            n, ty = p // th, p % th
            for tx in range(tw):
                gather_tile(x, n, 4 * ty - ph, 4 * tx - pw, d)
                for b in range(6):  # t = Bᵀ d, column by column
                    for c in range(cu):
                        r = _bt6(d[0, b, c], d[1, b, c], d[2, b, c], d[3, b, c], d[4, b, c],
                                 d[5, b, c])
                        t[0, b, c] = r[0]
                        t[1, b, c] = r[1]
                        t[2, b, c] = r[2]
                        t[3, b, c] = r[3]
                        t[4, b, c] = r[4]
                        t[5, b, c] = r[5]
                q = _u((p - p0) * tw + tx)
                for a in range(6):  # V = t B, row by row
                    k = _u(6 * a)
                    for c in range(cu):
                        r = _bt6(t[a, 0, c], t[a, 1, c], t[a, 2, c], t[a, 3, c], t[a, 4, c],
                                 t[a, 5, c])
                        buf[q, k, c] = r[0]
                        buf[q, k + 1, c] = r[1]
                        buf[q, k + 2, c] = r[2]
                        buf[q, k + 3, c] = r[3]
                        buf[q, k + 4, c] = r[4]
                        buf[q, k + 5, c] = r[5]
        _move_planes(v, p0 * tw, buf, True)


@kernel
def _output_transform(m: Any, th: int, tw: int, bias: Any, use_bias: bool, out: Any) -> None:
    """``Y = Aᵀ M A`` for every tile of m (36, N·TH·TW, F) into out (N, OH, OW, F), plus
    ``bias``; a last tile's rows and columns past the output are dropped."""
    n_, oh, ow, f_ = out.shape
    fu = _u(f_)
    rows, rb = n_ * th, _block_rows(tw)
    for blk in prange((rows + rb - 1) // rb):
        p0 = blk * rb
        p1 = min(rows, p0 + rb)
        buf = np.empty(((p1 - p0) * tw, 36, f_), dtype=m.dtype)
        _move_planes(m, p0 * tw, buf, False)
        s = np.empty((4, 6, f_), dtype=m.dtype)
        o = np.empty((4, 4, f_), dtype=m.dtype)
        for p in range(p0, p1):
            n, ty = p // th, p % th
            for tx in range(tw):
                mt = buf[_u((p - p0) * tw + tx)]
                for b in range(6):  # s = Aᵀ M, column by column
                    kb = _u(b)
                    for j in range(fu):
                        r = _at6(mt[kb, j], mt[kb + 6, j], mt[kb + 12, j], mt[kb + 18, j],
                                 mt[kb + 24, j], mt[kb + 30, j])
                        s[0, b, j] = r[0]
                        s[1, b, j] = r[1]
                        s[2, b, j] = r[2]
                        s[3, b, j] = r[3]
                for a in range(4):  # Y = s A, row by row
                    for j in range(fu):
                        r = _at6(s[a, 0, j], s[a, 1, j], s[a, 2, j], s[a, 3, j], s[a, 4, j],
                                 s[a, 5, j])
                        o[a, 0, j] = r[0]
                        o[a, 1, j] = r[1]
                        o[a, 2, j] = r[2]
                        o[a, 3, j] = r[3]
                for a in range(min(4, oh - 4 * ty)):
                    for e in range(min(4, ow - 4 * tx)):
                        dst = out[_u(n), _u(4 * ty + a), _u(4 * tx + e)]
                        if use_bias:
                            for j in range(fu):
                                dst[j] = o[a, e, j] + bias[j]
                        else:
                            for j in range(fu):
                                dst[j] = o[a, e, j]


@kernel
def _grad_transform(gl: Any, th: int, tw: int, gy: Any) -> None:
    """``dM = A dY Aᵀ`` for every 4x4 block of gl (N, OH, OW, F) (zeros past the output)
    into gy (36, N·TH·TW, F)."""
    n_, f_ = gl.shape[0], gl.shape[3]
    fu = _u(f_)
    rows, rb = n_ * th, _block_rows(tw)
    for blk in prange((rows + rb - 1) // rb):
        p0 = blk * rb
        p1 = min(rows, p0 + rb)
        buf = np.empty(((p1 - p0) * tw, 36, f_), dtype=gy.dtype)
        d = np.zeros((4, 4, f_), dtype=gy.dtype)
        t = np.empty((6, 4, f_), dtype=gy.dtype)
        for p in range(p0, p1):
            n, ty = p // th, p % th
            for tx in range(tw):
                gather_tile(gl, n, 4 * ty, 4 * tx, d)
                for b in range(4):  # t = A dY, column by column
                    for j in range(fu):
                        r = _a4(d[0, b, j], d[1, b, j], d[2, b, j], d[3, b, j])
                        t[0, b, j] = r[0]
                        t[1, b, j] = r[1]
                        t[2, b, j] = r[2]
                        t[3, b, j] = r[3]
                        t[4, b, j] = r[4]
                        t[5, b, j] = r[5]
                q = _u((p - p0) * tw + tx)
                for i in range(6):  # dM = t Aᵀ, row by row
                    k = _u(6 * i)
                    for j in range(fu):
                        r = _a4(t[i, 0, j], t[i, 1, j], t[i, 2, j], t[i, 3, j])
                        buf[q, k, j] = r[0]
                        buf[q, k + 1, j] = r[1]
                        buf[q, k + 2, j] = r[2]
                        buf[q, k + 3, j] = r[3]
                        buf[q, k + 4, j] = r[4]
                        buf[q, k + 5, j] = r[5]
        _move_planes(gy, p0 * tw, buf, True)


@kernel
def _input_grad(dv: Any, ph: int, pw: int, th: int, tw: int, gx: Any) -> None:
    """``gx = Σ B dV Bᵀ`` over the overlapping 6x6 tiles of dv (36, N·TH·TW, C) into the
    data gradient gx (N, H, W, C), tile by tile, dropping what falls on the padding."""
    n_, h_, w_, c_ = gx.shape
    cu = _u(c_)
    for n in prange(n_):  # tiles overlap only within an image: one block per image
        gx[n] = 0.0
        t = np.empty((6, 6, c_), dtype=gx.dtype)
        buf = np.empty((tw, 36, c_), dtype=dv.dtype)  # one row of tiles, tile-major
        for ty in range(th):
            _move_planes(dv, (n * th + ty) * tw, buf, False)
            for tx in range(tw):
                dt = buf[_u(tx)]
                for b in range(6):  # t = B dV, column by column
                    kb = _u(b)
                    for c in range(cu):
                        r = _b6(dt[kb, c], dt[kb + 6, c], dt[kb + 12, c], dt[kb + 18, c],
                                dt[kb + 24, c], dt[kb + 30, c])
                        t[0, b, c] = r[0]
                        t[1, b, c] = r[1]
                        t[2, b, c] = r[2]
                        t[3, b, c] = r[3]
                        t[4, b, c] = r[4]
                        t[5, b, c] = r[5]
                for i in range(6):  # dd = t Bᵀ, row by row, added where it is data
                    y = 4 * ty + i - ph
                    if y < 0 or y >= h_:
                        continue
                    x0 = 4 * tx - pw
                    row = gx[_u(n), _u(y)]
                    if x0 >= 0 and x0 + 6 <= w_:  # the whole row lies in the data
                        for c in range(cu):
                            r = _b6(t[i, 0, c], t[i, 1, c], t[i, 2, c], t[i, 3, c],
                                    t[i, 4, c], t[i, 5, c])
                            row[_u(x0), c] += r[0]
                            row[_u(x0 + 1), c] += r[1]
                            row[_u(x0 + 2), c] += r[2]
                            row[_u(x0 + 3), c] += r[3]
                            row[_u(x0 + 4), c] += r[4]
                            row[_u(x0 + 5), c] += r[5]
                    else:
                        for c in range(cu):
                            r = _b6(t[i, 0, c], t[i, 1, c], t[i, 2, c], t[i, 3, c],
                                    t[i, 4, c], t[i, 5, c])
                            for k in range(6):
                                if 0 <= x0 + k < w_:
                                    row[_u(x0 + k), c] += r[k]


# ------------------------------------------------------------------------- the layer
def weight_transform(filters: Any, c: int, transposed: bool = False,
                     out: Any | None = None) -> Any:
    """Filters (rows (F, 9·C), or taps last, winograd.taps_last) → U (36, F, C) = ``G w Gᵀ``,
    or with ``transposed`` Uᵀ (36, C, F), in the weights' dtype (float64 made ResNet's
    512-channel filters 8x slower, for no error the tests can see against the data
    transforms')."""
    return _FILTERS.to_domain(filters, c, transposed, out)


# --------------------------------------------------------------------- image blocks
# A layer's transform domain is 2.25x its output (36 planes per 16 outputs): written by one
# pass and read back by the next, it leaves the caches in between, and the transforms,
# which wait on memory, ran 1.3-4x slower from cold planes than from cached ones (here: an
# AMD EPYC with 1 MiB of L2 per core). So where the shapes allow, a layer runs as tasks
# over blocks of whole images, each taking its block through all three stages while its
# transform-domain slice (V and M forward, dM and dV backward: 36 x tiles x (C + F)
# values) stays in that core's cache: the forward of issue 11's CNN's 16x16, 32->64
# layer ran 1.4x faster on 1 thread and on 2, from cold caches (bench/engine_ab.py for
# whole steps).
#
# The products are the same per row of tiles (one BLAS call per plane, over the block's
# rows), and the transforms' blocks are whole rows of tiles either way; the floats come
# out as the unblocked path's here, but the tests hold only each path to itself. Blocks
# depend on the shapes alone, never the thread count.
BLOCK_BYTES = 1 << 20  # a block's transform-domain slice, about one core's L2
MIN_BLOCKS = 8  # enough tasks for the threads to share a layer
MIN_BLOCK_TILES = 32  # fewer rows than this and each plane's product is mostly packing


def image_blocks(plan: Plan, itemsize: int) -> list[tuple[int, int]] | None:
    """The blocks of images (start, stop) a layer runs in, or None where it runs whole.
    A block holds the images whose transform-domain slice fits ``BLOCK_BYTES`` (fewer
    where that leaves under ``MIN_BLOCKS`` blocks), but at least ``MIN_BLOCK_TILES`` tiles;
    the layer runs whole where that takes over twice ``BLOCK_BYTES`` or leaves fewer than
    ``MIN_BLOCKS`` blocks (model-zoo resnet18_v1's 8x8 layers at batch 32, 4 blocks of 8
    images, ran 1.03x slower by blocks on 2 threads: the weight gradient, queued only
    after the blocks, was left for the end of the backward)."""
    per_image = plan.th * plan.tw
    image_bytes = per_image * 36 * (plan.c + plan.f) * itemsize
    fit = BLOCK_BYTES // image_bytes
    images = max(-(-MIN_BLOCK_TILES // per_image), min(fit, plan.n // MIN_BLOCKS), 1)
    if images * image_bytes > 2 * BLOCK_BYTES or plan.n <= (MIN_BLOCKS - 1) * images:
        return None
    return [(n0, min(plan.n, n0 + images)) for n0 in range(0, plan.n, images)]


def _forward_block(plan: Plan, xl: Any, ut: Any, bias: Any, use_bias: bool, v: Any,
                   out: Any, n0: int, n1: int) -> None:
    """Images n0:n1 through the forward (one task): their tiles' V, its 36 products and
    the output, in cache; V copied into the layer's planes for the backward."""
    t0, t1 = n0 * plan.th * plan.tw, n1 * plan.th * plan.tw
    vb = np.empty((36, t1 - t0, plan.c), dtype=v.dtype)
    _input_transform(xl[n0:n1], plan.pad[0], plan.pad[1], plan.th, plan.tw, vb)
    mb = np.empty((36, t1 - t0, plan.f), dtype=v.dtype)
    np.matmul(vb, ut, out=mb)
    _output_transform(mb, plan.th, plan.tw, bias, use_bias, out[n0:n1])
    v[:, t0:t1] = vb


def _data_gradient_block(plan: Plan, gl: Any, u: Any, gy: Any, gx: Any, n0: int,
                         n1: int) -> None:
    """Images n0:n1 through the data gradient (one task): their tiles' dM (copied into the
    layer's planes for the weight gradient), its 36 products dV and the data gradient, in
    cache."""
    t0, t1 = n0 * plan.th * plan.tw, n1 * plan.th * plan.tw
    gb = np.empty((36, t1 - t0, plan.f), dtype=gy.dtype)
    _grad_transform(gl[n0:n1], plan.th, plan.tw, gb)
    dvb = np.empty((36, t1 - t0, plan.c), dtype=gy.dtype)
    np.matmul(gb, u, out=dvb)
    gy[:, t0:t1] = gb
    _input_grad(dvb, plan.pad[0], plan.pad[1], plan.th, plan.tw, gx[n0:n1])


def forward(plan: Plan, xl: Any, filters: Any, bias: Any | None,
            prepare: winograd.Prepare | None = None) -> tuple[Any, Any, Any]:
    """Output (N, OH, OW, F) channels-last for ``filters`` (rows (F, 9·C) or taps last, see
    winograd.taps_last), with the transformed data V (36, tiles, C) and
    filters U (36, F, C) that the backward reuses (``prepare``: see winograd.forward)."""
    dtype = xl.dtype
    xl = np.ascontiguousarray(xl)
    prepare = prepare or winograd.transformed_now(filters)
    blocks = image_blocks(plan, xl.itemsize)
    v = np.empty((36, plan.tiles, plan.c), dtype=dtype)
    if blocks is None:  # transformed before the filters are asked for: a queued filter
        # transform (weight_prep) finishes meanwhile
        _input_transform(xl, plan.pad[0], plan.pad[1], plan.th, plan.tw, v)
    # Uᵀ stored as such: OpenBLAS's (tiles, C) @ (C, F) ran 1.8x faster than with U's
    # transposed view on an 8x8 map's 128 tiles (the same on 512). Asked for before U,
    # which only the backward reads: queued ahead, the two are made in this order.
    ut = prepare("winograd4.Ut", partial(weight_transform, c=plan.c, transposed=True))
    u = prepare("winograd4.U", partial(weight_transform, c=plan.c))
    out = np.empty((plan.n, plan.oh, plan.ow, plan.f), dtype=dtype)
    # out[0, 0, 0]: an unread (F,) stand-in for no bias
    b = out[0, 0, 0] if bias is None else bias.astype(dtype, copy=False)
    if blocks is not None:
        run_tasks([partial(_forward_block, plan, xl, ut, b, bias is not None, v, out, n0, n1)
                   for n0, n1 in blocks])
        return out, v, u
    m = np.empty((36, plan.tiles, plan.f), dtype=dtype)
    gemm.planes(v, ut, m)
    _output_transform(m, plan.th, plan.tw, b, bias is not None, out)
    return out, v, u


def backward(plan: Plan, gl: Any, v: Any, u: Any, need_gx: bool,
             shape: tuple[int, ...] | None = None,
             out: Any | None = None) -> tuple[Any, Any | None]:
    """Gradients for output gradient ``gl`` (N, OH, OW, F) channels-last: the weight's as
    rows (F, 9·C), or in its own ``shape`` (F, C, 3, 3) when given (into ``out`` when
    given), and, if ``need_gx``, the data's (N, H, W, C) channels-last."""
    dtype = v.dtype
    gl = np.ascontiguousarray(gl, dtype=dtype)
    gy = np.empty((36, plan.tiles, plan.f), dtype=dtype)
    blocks = image_blocks(plan, v.itemsize) if need_gx else None
    if blocks is not None:  # the data gradient by blocks of images, then the weight's
        # (queued for another thread inside a deferring backward: see winograd)
        gx = np.empty((plan.n, plan.h, plan.w, plan.c), dtype=dtype)
        run_tasks([partial(_data_gradient_block, plan, gl, u, gy, gx, n0, n1)
                   for n0, n1 in blocks])
        return winograd.weight_gradient(_FILTERS, gy, v, shape, out), gx
    _grad_transform(gl, plan.th, plan.tw, gy)
    gw, dv = winograd.gradient_products(_FILTERS, gy, v, u, need_gx, shape, out)
    if dv is None:
        return gw, None
    gx = np.empty((plan.n, plan.h, plan.w, plan.c), dtype=dtype)
    _input_grad(dv, plan.pad[0], plan.pad[1], plan.th, plan.tw, gx)
    return gw, gx


__all__ = ["Plan", "available", "backward", "forward", "image_blocks", "tile_count",
           "weight_transform"]
