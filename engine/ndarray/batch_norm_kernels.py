"""Compiled BatchNorm passes (training statistics, normalization with an optional fused ReLU,
backward), alone or fused with the 2x2 max-pool that follows (numba).

Each pass reads a channels-last ``(rows, C)`` float32 matrix (or its (N, H, W, C) grid) once,
the channel loop innermost (vectorized); :class:`engine.ndarray.norm_ops.TrainingNorm` drives
them for the imperative op and the hybridized program's BatchNorm kernel alike, so both
compute the same floats.

**Fixed split.** The work is split into blocks of ``block`` rows (a multiple of the caller's
row unit, see :func:`block_rows`) that the engine's threads share. The per-channel sums
(mean and variance; the backward's Σg' and Σg'·x̂) are float64 partial sums, one per block,
each over its rows in order, then added up in block order: the same floats for 1 thread or
many, since the blocks depend on the shape only. The max-pool-fused passes take blocks of
pooled rows whose image rows are exactly the unfused blocks' rows, visited in the same
order, so fused and unfused sums are equal too.

>>> import numpy as np
>>> x = np.arange(8, dtype=np.float32).reshape(4, 2)
>>> mean, var = np.empty(2), np.empty(2)
>>> channel_stats(x, 2, mean, var)
>>> mean.tolist(), var.tolist()
([3.0, 4.0], [5.0, 5.0])
"""

from __future__ import annotations

from typing import Any

import numpy

from .cpu_kernels import _ZERO, _first_max, _relu, _relu_grad
from .kernel_threads import kernel, prange

# floats per block of the split: ~256 KiB of data, so a block's partial sums cost nothing
# beside it while a CNN layer still has tens of blocks to share out
_BLOCK_ELEMENTS = 1 << 16


def block_rows(rows: int, channels: int, unit: int) -> int:
    """Rows per block for a (rows, channels) matrix whose blocks must hold whole ``unit``s of
    rows (two image rows where a 2x2 max-pool may be fused, else 1)."""
    per = max(unit, (_BLOCK_ELEMENTS // max(channels, 1)) // unit * unit)
    return min(per, max(rows, 1) + (-max(rows, 1)) % unit)


@kernel
def channel_stats(x: Any, block: int, mean: Any, var: Any) -> None:
    """Per-column mean and biased variance of ``x`` (rows, C) into float64 ``mean``/``var``.

    Sums run in float64 around each column's first value (a shift that keeps E[d²] - E[d]²
    free of cancellation when the mean is large against the spread), one partial per block.
    """
    rows, cols = x.shape
    blocks = (rows + block - 1) // block
    shift = numpy.empty(cols)
    for c in range(cols):
        shift[c] = x[0, c]
    total = numpy.zeros((blocks, cols))
    squares = numpy.zeros((blocks, cols))
    for b in prange(blocks):
        for r in range(b * block, min(rows, (b + 1) * block)):
            for c in range(cols):
                d = numpy.float64(x[r, c]) - shift[c]
                total[b, c] += d
                squares[b, c] += d * d
    for c in range(cols):
        t, s = 0.0, 0.0
        for b in range(blocks):
            t += total[b, c]
            s += squares[b, c]
        m = t / rows
        mean[c] = shift[c] + m
        var[c] = max(s / rows - m * m, 0.0)


@kernel(rows=("x", "out"))
def normalize(x: Any, mean: Any, scale: Any, beta: Any, relu: bool, block: int,
              out: Any) -> None:
    """``out = (x - mean)·scale + beta`` per column (float32), then ReLU when ``relu``."""
    rows, cols = x.shape
    for b in prange((rows + block - 1) // block):
        for r in range(b * block, min(rows, (b + 1) * block)):
            for c in range(cols):
                y = (x[r, c] - mean[c]) * scale[c] + beta[c]
                if relu:
                    y = _relu(y)
                out[r, c] = y


@kernel
def normalize_grad_sums(g: Any, x: Any, mean: Any, inv_std: Any, scale: Any, beta: Any,
                        relu: bool, block: int, sum_g: Any, sum_gx: Any) -> None:
    """Per column, in float64: Σ g' and Σ g'·x̂ with x̂ = (x - mean)·inv_std, where g' is
    ``g`` through the ReLU mask when ``relu`` (recomputed from x as ``normalize`` did)."""
    rows, cols = x.shape
    blocks = (rows + block - 1) // block
    part_g = numpy.zeros((blocks, cols))
    part_gx = numpy.zeros((blocks, cols))
    for b in prange(blocks):
        for r in range(b * block, min(rows, (b + 1) * block)):
            for c in range(cols):
                d = x[r, c] - mean[c]
                gv = g[r, c]
                if relu:
                    gv = _relu_grad(gv, d * scale[c] + beta[c])
                part_g[b, c] += gv
                part_gx[b, c] += gv * (d * inv_std[c])
    _add_partials(part_g, part_gx, sum_g, sum_gx)


@kernel(rows=("g", "x", "gx"))
def normalize_grad(g: Any, x: Any, mean: Any, inv_std: Any, scale: Any, beta: Any,
                   relu: bool, per_xhat: Any, per_one: Any, factor: Any, block: int,
                   gx: Any) -> None:
    """``gx = (g' - x̂·per_xhat - per_one)·factor`` per column (float32): BatchNorm's input
    gradient with the batch statistics' share folded into two per-channel constants."""
    rows, cols = x.shape
    for b in prange((rows + block - 1) // block):
        for r in range(b * block, min(rows, (b + 1) * block)):
            for c in range(cols):
                d = x[r, c] - mean[c]
                gv = g[r, c]
                if relu:
                    gv = _relu_grad(gv, d * scale[c] + beta[c])
                gx[r, c] = (gv - (d * inv_std[c]) * per_xhat[c] - per_one[c]) * factor[c]


def _add_partials_source(part_g: Any, part_gx: Any, sum_g: Any, sum_gx: Any) -> None:
    """Add the blocks' partial sums up in block order."""
    for c in range(part_g.shape[1]):
        sg, sgx = 0.0, 0.0
        for b in range(part_g.shape[0]):
            sg += part_g[b, c]
            sgx += part_gx[b, c]
        sum_g[c] = sg
        sum_gx[c] = sgx


_add_partials = kernel(_add_partials_source).serial


# ------------------------------------------- BatchNorm + ReLU + 2x2 max-pool, fused
@kernel(rows=("x", "out", "arg"))
def normalize_max_pool(x: Any, mean: Any, scale: Any, beta: Any, relu: bool, out: Any,
                       arg: Any) -> None:
    """``normalize`` (and ReLU) followed by ``max_pool_2x2`` in one pass over ``x``
    (N, H, W, C): the normalized data is never written, only the pooled max and ``arg``."""
    n_, h_, w_, c_ = out.shape
    for p in prange(n_ * h_):
        n, i = p // h_, p % h_
        for j in range(w_):
            for c in range(c_):
                m, s, b = mean[c], scale[c], beta[c]
                y0 = (x[n, 2 * i, 2 * j, c] - m) * s + b
                y1 = (x[n, 2 * i, 2 * j + 1, c] - m) * s + b
                y2 = (x[n, 2 * i + 1, 2 * j, c] - m) * s + b
                y3 = (x[n, 2 * i + 1, 2 * j + 1, c] - m) * s + b
                if relu:
                    y0, y1, y2, y3 = _relu(y0), _relu(y1), _relu(y2), _relu(y3)
                out[n, i, j, c], arg[n, i, j, c] = _first_max(y0, y1, y2, y3)


@kernel
def normalize_max_pool_grad_sums(g: Any, arg: Any, x: Any, mean: Any, inv_std: Any,
                                 scale: Any, beta: Any, relu: bool, block: int, sum_g: Any,
                                 sum_gx: Any) -> None:
    """``normalize_grad_sums`` for the gradient ``g`` of the pooled output: each cell's g'
    is its window's gradient where it held the first max (else 0), through the ReLU mask.
    ``block`` counts pooled rows (2·W image rows each); cells are visited in row-major
    (N, H, W) order within a block, as the unfused sums visit them, so the float64 sums
    come out the same."""
    n_, h_, w_, c_ = g.shape
    pooled_rows = n_ * h_
    blocks = (pooled_rows + block - 1) // block
    part_g = numpy.zeros((blocks, c_))
    part_gx = numpy.zeros((blocks, c_))
    for b in prange(blocks):
        for p in range(b * block, min(pooled_rows, (b + 1) * block)):
            n, i = p // h_, p % h_
            for di in range(2):
                for j in range(w_):
                    for dj in range(2):
                        k = 2 * di + dj
                        for c in range(c_):
                            d = x[n, 2 * i + di, 2 * j + dj, c] - mean[c]
                            gv = g[n, i, j, c] if arg[n, i, j, c] == k else _ZERO
                            if relu:
                                gv = _relu_grad(gv, d * scale[c] + beta[c])
                            part_g[b, c] += gv
                            part_gx[b, c] += gv * (d * inv_std[c])
    _add_partials(part_g, part_gx, sum_g, sum_gx)


@kernel(rows=("g", "arg", "x", "gx"))
def normalize_max_pool_grad(g: Any, arg: Any, x: Any, mean: Any, inv_std: Any, scale: Any,
                            beta: Any, relu: bool, per_xhat: Any, per_one: Any, factor: Any,
                            gx: Any) -> None:
    """``normalize_grad`` for the gradient ``g`` of the pooled output (see the sums above)."""
    n_, h_, w_, c_ = g.shape
    for p in prange(n_ * h_):
        n, i = p // h_, p % h_
        for di in range(2):
            for j in range(w_):
                for dj in range(2):
                    k = 2 * di + dj
                    for c in range(c_):
                        d = x[n, 2 * i + di, 2 * j + dj, c] - mean[c]
                        gv = g[n, i, j, c] if arg[n, i, j, c] == k else _ZERO
                        if relu:
                            gv = _relu_grad(gv, d * scale[c] + beta[c])
                        gx[n, 2 * i + di, 2 * j + dj, c] = (
                            gv - (d * inv_std[c]) * per_xhat[c] - per_one[c]) * factor[c]
