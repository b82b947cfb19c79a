"""Compiled single-pass CPU kernels for the memory-bound parts of a CNN step (numba).

BatchNorm (training statistics, normalization with an optional fused ReLU, backward; in
:mod:`.batch_norm_kernels`), 2x2/stride-2 max-pooling, a residual add+ReLU and a Dense
layer's bias+ReLU spend their time streaming activations through memory; as chains of numpy
calls each elementwise step is one more full pass (and a temporary), which made them cost as
much as the convolutions' GEMMs. Each kernel here is one pass over a channels-last
``(rows, channels)`` matrix (or an (N, H, W, C) array), contiguous in the channels, so the
inner loop vectorizes across channels.

Every kernel splits its work over the engine's threads (:mod:`.kernel_threads`) into
blocks fixed by the shapes alone: rows of pooled output, blocks of elements, blocks of
columns. None of them reduces across blocks, so each element's float operations are the
same for any thread count.

The kernels cover float32 numpy arrays; ``available(x)`` says when one applies. Everything
else (cupy, float64, other layouts) keeps the numpy code path of the calling op. The fused
ReLU follows ``engine.ndarray.ops``' relu exactly (``maximum(y, 0)`` forward, ``g·sign(out)``
backward), so a hybridized BatchNorm+ReLU computes the same floats as the two imperative ops.

Compiled code is cached on disk (``cache=True``, beside this file or in numba's user cache
when that is read-only): with an empty cache the first CNN training step compiles the
kernels it uses (4-6 s for one build, once per installation; a multi-threaded process also
compiles the parallel builds); later processes load them (under 1 s, plus ~0.4 s to import
numba). Without numba the functions stay plain Python (correct, slow, used by no op:
``available`` is then False).

>>> import numpy as np
>>> x, out = np.array([-1.0, 2.0], np.float32), np.empty(2, np.float32)
>>> add_relu(x, x, out)
>>> out.tolist()
[0.0, 4.0]
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy

from .kernel_threads import ENABLED, JIT_OPTIONS, kernel, numba, prange, run_tasks

# elements per block of an elementwise kernel (one block's share of the work: ~64 KiB)
ELEMENT_BLOCK = 16384


def available(*arrays: Any) -> bool:
    """Whether the compiled kernels apply: numba present and every array a float32 numpy array."""
    return ENABLED and all(type(a) is numpy.ndarray and a.dtype == numpy.float32
                           for a in arrays)


def _jit(fn: Any) -> Any:
    """A serial compiled helper (inlined by the kernels that call it)."""
    if not ENABLED:
        return fn
    return numba.njit(**JIT_OPTIONS)(fn)


_ZERO = numpy.float32(0.0)
_ONE = numpy.float32(1.0)


# -------------------------------------------------------------------------- helpers
@_jit
def _relu(y: Any) -> Any:
    # maximum(y, 0) as numpy computes it: NaN propagates, -0.0 and negatives give +0.0
    return y if y > _ZERO or y != y else _ZERO


@_jit
def _relu_grad(g: Any, y: Any) -> Any:
    # g·sign(relu(y)): 1 above zero, 0 at or below, NaN at NaN (as engine.ndarray.ops' rule)
    return g * (_ONE if y > _ZERO else (y if y != y else _ZERO))


# ------------------------------------------------------------------------ 2x2 max-pooling
@_jit
def _first_max(a: Any, b: Any, c: Any, d: Any) -> Any:
    # the window's max and the position (0..3) of its first occurrence, as max_pool_2x2
    best, k = a, 0
    if (b > best or b != b) and best == best:
        best, k = b, 1
    if (c > best or c != c) and best == best:
        best, k = c, 2
    if (d > best or d != d) and best == best:
        best, k = d, 3
    return best, k


@kernel(rows=("x", "out", "arg"))
def max_pool_2x2(x: Any, out: Any, arg: Any) -> None:
    """2x2/stride-2 max-pool of channels-last ``x`` (N, H, W, C) into ``out`` (N, H/2, W/2, C),
    with ``arg`` (uint8) the window position (0..3, row-major) of the first maximum; one
    block per output row."""
    n_, h_, w_, c_ = out.shape
    for p in prange(n_ * h_):
        n, i = p // h_, p % h_
        for j in range(w_):
            for c in range(c_):
                out[n, i, j, c], arg[n, i, j, c] = _first_max(
                    x[n, 2 * i, 2 * j, c], x[n, 2 * i, 2 * j + 1, c],
                    x[n, 2 * i + 1, 2 * j, c], x[n, 2 * i + 1, 2 * j + 1, c])


@kernel(rows=("g", "arg", "gx"))
def max_pool_2x2_grad(g: Any, arg: Any, gx: Any) -> None:
    """Each output's gradient to its window's first maximum, zeros elsewhere. ``gx``
    (N, H, W, C) is written once, cell by cell in memory order (4x faster than writing the
    four window positions as four interleaved streams), so it needs no clearing; one block
    per output row (two rows of ``gx``)."""
    n_, h_, w_, c_ = g.shape
    for p in prange(n_ * h_):
        n, i = p // h_, p % h_
        for di in range(2):
            for j in range(w_):
                for dj in range(2):
                    k = 2 * di + dj
                    for c in range(c_):
                        hit = arg[n, i, j, c] == k
                        gx[n, 2 * i + di, 2 * j + dj, c] = g[n, i, j, c] if hit else _ZERO


@kernel
def max_pool_2d(x: Any, kh: int, kw: int, sh: int, sw: int, ph: int, pw: int, lowest: Any,
                out: Any, arg: Any) -> None:
    """Max-pool of channels-last ``x`` (N, H, W, C) with any window, stride and padding into
    ``out`` (N, OH, OW, C), with ``arg`` (uint8) the row-major window position of the first
    maximum (the cell MXNet's backward picks). Padding and cells past it (ceil mode) count as
    ``lowest``, the dtype's lowest finite value, as MXNet's kernels; one block per output row.

    Two branch-free passes over each window, channels innermost (both vectorize): the first
    maximum's value (a strict running maximum that the first NaN ends), then its position
    (the first cell holding that value, or the first NaN). A running maximum that tracked the
    position as it went took 4x as long (a data-dependent branch per cell and channel).
    Padding at position 0 stands for a ``lowest`` there, which keeps ties with it."""
    n_, oh_, ow_, c_ = out.shape
    h_, w_ = x.shape[1], x.shape[2]
    for p in prange(n_ * oh_):
        n, i = p // oh_, p % oh_
        y0 = i * sh - ph
        position = numpy.empty(c_, numpy.float32)  # uint8 selects do not vectorize here
        for j in range(ow_):
            x0 = j * sw - pw
            for c in range(c_):
                out[n, i, j, c] = lowest
            for di in range(kh):
                y = y0 + di
                if y < 0 or y >= h_:
                    continue
                for dj in range(kw):
                    xx = x0 + dj
                    if xx < 0 or xx >= w_:
                        continue
                    if di == 0 and dj == 0:
                        for c in range(c_):
                            out[n, i, j, c] = x[n, y, xx, c]
                        continue
                    for c in range(c_):
                        v, m = x[n, y, xx, c], out[n, i, j, c]
                        out[n, i, j, c] = v if ((v > m) | (v != v)) & (m == m) else m
            for c in range(c_):
                position[c] = 0.0
            for k in range(kh * kw - 1, -1, -1):  # backwards: the first hit is left
                y, xx = y0 + k // kw, x0 + k % kw
                if y < 0 or y >= h_ or xx < 0 or xx >= w_:
                    continue
                at = numpy.float32(k)
                for c in range(c_):
                    v, m = x[n, y, xx, c], out[n, i, j, c]
                    hit = (v == m) | ((m != m) & (v != v))
                    position[c] = at if hit else position[c]
            if y0 < 0 or x0 < 0 or y0 >= h_ or x0 >= w_:
                for c in range(c_):
                    if out[n, i, j, c] == lowest:
                        position[c] = 0.0
            for c in range(c_):
                arg[n, i, j, c] = numpy.uint8(position[c])


@kernel
def max_pool_2d_grad(g: Any, arg: Any, kh: int, kw: int, sh: int, sw: int, ph: int, pw: int,
                     gx: Any) -> None:
    """Each output's gradient added to its window's first maximum (``arg`` of
    :func:`max_pool_2d`), in output order; windows overlap within an image only, so one
    block per image."""
    n_, oh_, ow_, c_ = g.shape
    h_, w_ = gx.shape[1], gx.shape[2]
    for n in prange(n_):
        gx[n] = 0.0
        for i in range(oh_):
            for j in range(ow_):
                src = g[n, i, j]
                at = arg[n, i, j]
                for di in range(kh):
                    y = i * sh - ph + di
                    if y < 0 or y >= h_:
                        continue
                    for dj in range(kw):
                        xx = j * sw - pw + dj
                        if xx < 0 or xx >= w_:
                            continue
                        k = di * kw + dj
                        dst = gx[n, y, xx]
                        for c in range(c_):
                            if at[c] == k:
                                dst[c] += src[c]


@kernel(rows=("src", "dst"))
def channels_last_to_first(src: Any, dst: Any) -> None:
    """``dst[f, c, k] = src[f, k, c]``: one block per leading index (a filter), whose
    K x C values stay in cache while they are transposed."""
    for f in prange(src.shape[0]):
        s = src[f]
        d = dst[f]
        for k in range(s.shape[0]):
            for c in range(s.shape[1]):
                d[c, k] = s[k, c]


def assign(target: Any, value: Any) -> None:
    """``target[...] = value``, faster for the weight gradients a training step copies into
    its parameters: a channels-first (F, C, *K) target from a transposed channels-last
    (F, *K, C) gradient (what a convolution computes) through
    :func:`channels_last_to_first` (numpy's strided copy of that view ran 2.6x slower than
    a contiguous copy: 5.6 ms for a 512x512x3x3 weight); anything else as numpy does."""
    if (value.ndim >= 3 and target.ndim == value.ndim and target.shape == value.shape
            and available(target, value) and target.flags.c_contiguous):
        order = (0, *range(2, value.ndim), 1)
        stored = value.transpose(order)
        if stored.flags.c_contiguous:
            f, c = value.shape[0], value.shape[1]
            channels_last_to_first(stored.reshape(f, -1, c), target.reshape(f, c, -1))
            return
    if (type(target) is numpy.ndarray and type(value) is numpy.ndarray and target.ndim
            and target.shape == value.shape and target.nbytes >= 2 << 20):
        # a big plain copy (a 1x1-map convolution's 9.4 MB gradient): in blocks on the
        # engine's threads (memory copies scale with the cores here)
        run_tasks([partial(numpy.copyto, target[r0:r1], value[r0:r1])
                   for r0, r1 in leading_blocks(target)])
        return
    target[...] = value


def leading_blocks(array: Any) -> list[tuple[int, int]]:
    """``array``'s first axis in blocks of about 1 MiB, as (start, stop) pairs, for a pass
    over a big array on the engine's threads: a few tasks per thread (each costs 10-30 µs to
    hand out), each block mostly in cache while it is worked on."""
    per_row = max(1, array[0].nbytes) if array.ndim and len(array) else 1
    rows = max(1, (1 << 20) // per_row)
    return [(r, min(r + rows, len(array))) for r in range(0, len(array), rows)]


# ------------------------------------------------------------ global average pool
@kernel(rows=("x", "out"))
def channel_sums(x: Any, out: Any) -> None:
    """``out[n, c] = Σ_k x[n, k, c]`` over channels-last ``x`` (N, K, C), K >= 1, added in
    float32 in position order k = 0, 1, ...: numpy's ``sum`` over the middle axes adds whole
    rows of channels in that order, so the floats are the same; one block per image."""
    n_, k_, c_ = x.shape
    for n in prange(n_):
        for c in range(c_):
            out[n, c] = x[n, 0, c]
        for k in range(1, k_):
            for c in range(c_):
                out[n, c] += x[n, k, c]


@kernel(rows=("g", "gx"))
def spread_channels(g: Any, gx: Any) -> None:
    """``gx[n, k, c] = g[n, c]`` at every position k of (N, K, C) ``gx``: a global pool's
    gradient, each channel's value over its whole extent; one block per image."""
    n_, k_, c_ = gx.shape
    for n in prange(n_):
        for k in range(k_):
            for c in range(c_):
                gx[n, k, c] = g[n, c]


# ------------------------------------------------------------ residual add + ReLU
# An element loop indexes with unsigned integers: with a signed index numba checks each
# access for a negative (wrap-around) index, which kept LLVM from vectorizing these loops:
# add_relu over 128k float32 took 246 us on one thread and 224 us on two; unsigned, 52 us
# and 15 us (the same floats).
_index = numba.uint64 if ENABLED else int


@kernel(rows=("a", "b", "out"))
def add_relu(a: Any, b: Any, out: Any) -> None:
    """``out = maximum(a + b, 0)`` over 1-D arrays (float32 sum, as numpy's add)."""
    size = out.shape[0]
    for blk in prange((size + ELEMENT_BLOCK - 1) // ELEMENT_BLOCK):
        for i in range(_index(blk * ELEMENT_BLOCK), _index(min(size, (blk + 1) * ELEMENT_BLOCK))):
            out[i] = _relu(a[i] + b[i])


@kernel(rows=("g", "out", "gx"))
def relu_grad_of_output(g: Any, out: Any, gx: Any) -> None:
    """``gx = g·sign(out)`` over 1-D arrays, for ``out`` a ReLU's output (engine.ndarray.ops'
    relu rule)."""
    size = out.shape[0]
    for blk in prange((size + ELEMENT_BLOCK - 1) // ELEMENT_BLOCK):
        for i in range(_index(blk * ELEMENT_BLOCK), _index(min(size, (blk + 1) * ELEMENT_BLOCK))):
            gx[i] = _relu_grad(g[i], out[i])


# ------------------------------------------------------------ Dense (FullyConnected)
@kernel(rows=("out",))
def bias_relu(out: Any, bias: Any, use_bias: bool, relu: bool) -> None:
    """In place over ``out`` (rows, F): ``+= bias`` per row when ``use_bias`` (numpy's
    broadcast add), then ``maximum(·, 0)`` when ``relu``: one pass instead of two."""
    rows, f = out.shape
    fu = numba.uint64(f) if ENABLED else f
    per = max(1, ELEMENT_BLOCK // max(f, 1))
    for blk in prange((rows + per - 1) // per):
        for r in range(blk * per, min(rows, (blk + 1) * per)):
            for j in range(fu):
                y = out[r, j]
                if use_bias:
                    y = y + bias[j]
                if relu:
                    y = _relu(y)
                out[r, j] = y


# columns per block of relu_mask_grad: each block sums its own columns over all rows, in row
# order, so the bias gradient is numpy's ``sum(axis=0)`` to the bit for any thread count
_COLUMN_BLOCK = 64


@kernel
def relu_mask_grad(g: Any, out: Any, grad: Any, gb: Any, want_gb: bool) -> None:
    """``grad = g·(out > 0)`` over (rows, F) (the fused Dense+relu backward's mask: 1 or 0),
    and when ``want_gb`` its column sums into ``gb``, added row after row as numpy's
    ``sum(axis=0)`` adds them (the same floats): the bias gradient in the same pass."""
    rows, f = g.shape
    for blk in prange((f + _COLUMN_BLOCK - 1) // _COLUMN_BLOCK):
        lo = numba.uint64(blk * _COLUMN_BLOCK) if ENABLED else blk * _COLUMN_BLOCK
        hi = numba.uint64(min(f, (blk + 1) * _COLUMN_BLOCK)) if ENABLED else \
            min(f, (blk + 1) * _COLUMN_BLOCK)
        for r in range(rows):
            for j in range(lo, hi):
                v = g[r, j] * (_ONE if out[r, j] > _ZERO else _ZERO)
                grad[r, j] = v
            if want_gb:
                if r == 0:
                    for j in range(lo, hi):
                        gb[j] = grad[0, j]
                else:
                    for j in range(lo, hi):
                        gb[j] += grad[r, j]
