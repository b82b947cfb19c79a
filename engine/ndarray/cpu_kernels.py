"""Compiled single-pass CPU kernels for the memory-bound parts of a CNN step (numba).

BatchNorm (training statistics, normalization with an optional fused ReLU, backward),
2x2/stride-2 max-pooling and a residual add+ReLU spend their time streaming activations
through memory; as chains
of numpy calls each elementwise step is one more full pass (and a temporary), which made
them cost as much as the convolutions' GEMMs. Each kernel here is one pass over a
channels-last ``(rows, channels)`` matrix (or an (N, H, W, C) array), contiguous in the
channels, so the inner loop vectorizes across channels.

The kernels cover float32 numpy arrays; ``available(x)`` says when one applies. Everything
else (cupy, float64, other layouts) keeps the numpy code path of the calling op. The fused
ReLU follows ``engine.ndarray.ops``' relu exactly (``maximum(y, 0)`` forward, ``g·sign(out)``
backward), so a hybridized BatchNorm+ReLU computes the same floats as the two imperative ops.

Compiled code is cached on disk (``cache=True``, beside this file or in numba's user cache
when that is read-only): with an empty cache the first CNN training step compiles the
kernels it uses (4-6 s, once per installation); later processes load them (under 1 s, plus
~0.4 s to import numba). Without numba the functions stay plain Python (correct, slow, used
by no op: ``available`` is then False).

>>> import numpy as np
>>> x = np.arange(8, dtype=np.float32).reshape(4, 2)
>>> mean, var = np.empty(2), np.empty(2)
>>> channel_stats(x, mean, var)
>>> mean.tolist(), var.tolist()
([3.0, 4.0], [5.0, 5.0])
"""

from __future__ import annotations

from typing import Any

import numpy

try:  # numba is a runtime dependency; without it every op keeps its numpy path
    import numba

    ENABLED = True
except ImportError:  # pragma: no cover - exercised only where numba is missing
    numba = None
    ENABLED = False


def available(*arrays: Any) -> bool:
    """Whether the compiled kernels apply: numba present and every array a float32 numpy array."""
    return ENABLED and all(type(a) is numpy.ndarray and a.dtype == numpy.float32
                           for a in arrays)


def _jit(fn: Any) -> Any:
    if not ENABLED:
        return fn
    return numba.njit(cache=True, nogil=True, error_model="numpy", boundscheck=False)(fn)


_ZERO = numpy.float32(0.0)
_ONE = numpy.float32(1.0)


# ------------------------------------------------------------------------------- BatchNorm
@_jit
def channel_stats(x: Any, mean: Any, var: Any) -> None:
    """Per-column mean and biased variance of ``x`` (rows, C) into float64 ``mean``/``var``.

    One pass; sums run in float64 around each column's first value (a shift that keeps
    E[d²] - E[d]² free of cancellation when the mean is large against the spread).
    """
    rows, cols = x.shape
    shift = numpy.empty(cols)
    total = numpy.zeros(cols)
    squares = numpy.zeros(cols)
    for c in range(cols):
        shift[c] = x[0, c]
    for r in range(rows):
        for c in range(cols):
            d = numpy.float64(x[r, c]) - shift[c]
            total[c] += d
            squares[c] += d * d
    for c in range(cols):
        m = total[c] / rows
        mean[c] = shift[c] + m
        var[c] = max(squares[c] / rows - m * m, 0.0)


@_jit
def normalize(x: Any, mean: Any, scale: Any, beta: Any, relu: bool, out: Any) -> None:
    """``out = (x - mean)·scale + beta`` per column (float32), then ReLU when ``relu``."""
    rows, cols = x.shape
    for r in range(rows):
        for c in range(cols):
            y = (x[r, c] - mean[c]) * scale[c] + beta[c]
            if relu:
                y = _relu(y)
            out[r, c] = y


@_jit
def _relu(y: Any) -> Any:
    # maximum(y, 0) as numpy computes it: NaN propagates, -0.0 and negatives give +0.0
    return y if y > _ZERO or y != y else _ZERO


@_jit
def _relu_grad(g: Any, y: Any) -> Any:
    # g·sign(relu(y)): 1 above zero, 0 at or below, NaN at NaN (as engine.ndarray.ops' rule)
    return g * (_ONE if y > _ZERO else (y if y != y else _ZERO))


@_jit
def normalize_grad_sums(g: Any, x: Any, mean: Any, inv_std: Any, scale: Any, beta: Any,
                        relu: bool, sum_g: Any, sum_gx: Any) -> None:
    """Per column, in float64: Σ g' and Σ g'·x̂ with x̂ = (x - mean)·inv_std, where g' is
    ``g`` through the ReLU mask when ``relu`` (recomputed from x as ``normalize`` did)."""
    rows, cols = x.shape
    for c in range(cols):
        sum_g[c] = 0.0
        sum_gx[c] = 0.0
    for r in range(rows):
        for c in range(cols):
            d = x[r, c] - mean[c]
            gv = g[r, c]
            if relu:
                gv = _relu_grad(gv, d * scale[c] + beta[c])
            sum_g[c] += gv
            sum_gx[c] += gv * (d * inv_std[c])


@_jit
def normalize_grad(g: Any, x: Any, mean: Any, inv_std: Any, scale: Any, beta: Any,
                   relu: bool, per_xhat: Any, per_one: Any, factor: Any, gx: Any) -> None:
    """``gx = (g' - x̂·per_xhat - per_one)·factor`` per column (float32): BatchNorm's input
    gradient with the batch statistics' share folded into two per-channel constants."""
    rows, cols = x.shape
    for r in range(rows):
        for c in range(cols):
            d = x[r, c] - mean[c]
            gv = g[r, c]
            if relu:
                gv = _relu_grad(gv, d * scale[c] + beta[c])
            gx[r, c] = (gv - (d * inv_std[c]) * per_xhat[c] - per_one[c]) * factor[c]


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


@_jit
def max_pool_2x2(x: Any, out: Any, arg: Any) -> None:
    """2x2/stride-2 max-pool of channels-last ``x`` (N, H, W, C) into ``out`` (N, H/2, W/2, C),
    with ``arg`` (uint8) the window position (0..3, row-major) of the first maximum."""
    n_, h_, w_, c_ = out.shape
    for n in range(n_):
        for i in range(h_):
            for j in range(w_):
                for c in range(c_):
                    out[n, i, j, c], arg[n, i, j, c] = _first_max(
                        x[n, 2 * i, 2 * j, c], x[n, 2 * i, 2 * j + 1, c],
                        x[n, 2 * i + 1, 2 * j, c], x[n, 2 * i + 1, 2 * j + 1, c])


@_jit
def max_pool_2x2_grad(g: Any, arg: Any, gx: Any) -> None:
    """Each output's gradient to its window's first maximum, zeros elsewhere. ``gx``
    (N, H, W, C) is written once, cell by cell in memory order (4x faster than writing the
    four window positions as four interleaved streams), so it needs no clearing."""
    n_, h_, w_, c_ = g.shape
    for n in range(n_):
        for i in range(h_):
            for di in range(2):
                for j in range(w_):
                    for dj in range(2):
                        k = 2 * di + dj
                        for c in range(c_):
                            hit = arg[n, i, j, c] == k
                            gx[n, 2 * i + di, 2 * j + dj, c] = g[n, i, j, c] if hit else _ZERO


# ------------------------------------------- BatchNorm + ReLU + 2x2 max-pool, fused
@_jit
def normalize_max_pool(x: Any, mean: Any, scale: Any, beta: Any, relu: bool, out: Any,
                       arg: Any) -> None:
    """``normalize`` (and ReLU) followed by ``max_pool_2x2`` in one pass over ``x``
    (N, H, W, C): the normalized data is never written, only the pooled max and ``arg``."""
    n_, h_, w_, c_ = out.shape
    for n in range(n_):
        for i in range(h_):
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


@_jit
def normalize_max_pool_grad_sums(g: Any, arg: Any, x: Any, mean: Any, inv_std: Any,
                                 scale: Any, beta: Any, relu: bool, sum_g: Any,
                                 sum_gx: Any) -> None:
    """``normalize_grad_sums`` for the gradient ``g`` of the pooled output: each cell's g'
    is its window's gradient where it held the first max (else 0), through the ReLU mask.
    Cells are visited in row-major (N, H, W) order, as the unfused sums visit them, so the
    float64 sums come out the same."""
    n_, h_, w_, c_ = g.shape
    for c in range(c_):
        sum_g[c] = 0.0
        sum_gx[c] = 0.0
    for n in range(n_):
        for i in range(h_):
            for di in range(2):
                for j in range(w_):
                    for dj in range(2):
                        k = 2 * di + dj
                        for c in range(c_):
                            d = x[n, 2 * i + di, 2 * j + dj, c] - mean[c]
                            gv = g[n, i, j, c] if arg[n, i, j, c] == k else _ZERO
                            if relu:
                                gv = _relu_grad(gv, d * scale[c] + beta[c])
                            sum_g[c] += gv
                            sum_gx[c] += gv * (d * inv_std[c])


@_jit
def normalize_max_pool_grad(g: Any, arg: Any, x: Any, mean: Any, inv_std: Any, scale: Any,
                            beta: Any, relu: bool, per_xhat: Any, per_one: Any, factor: Any,
                            gx: Any) -> None:
    """``normalize_grad`` for the gradient ``g`` of the pooled output (see the sums above)."""
    n_, h_, w_, c_ = g.shape
    for n in range(n_):
        for i in range(h_):
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


# ------------------------------------------------------------ residual add + ReLU
@_jit
def add_relu(a: Any, b: Any, out: Any) -> None:
    """``out = maximum(a + b, 0)`` over 1-D arrays (float32 sum, as numpy's add)."""
    for i in range(out.shape[0]):
        out[i] = _relu(a[i] + b[i])


@_jit
def relu_grad_of_output(g: Any, out: Any, gx: Any) -> None:
    """``gx = g·sign(out)`` over 1-D arrays, for ``out`` a ReLU's output (engine.ndarray.ops'
    relu rule)."""
    for i in range(out.shape[0]):
        gx[i] = _relu_grad(g[i], out[i])


# ------------------------------------------------------------ Dense (FullyConnected)
@_jit
def bias_relu(out: Any, bias: Any, use_bias: bool, relu: bool) -> None:
    """In place over ``out`` (rows, F): ``+= bias`` per row when ``use_bias`` (numpy's
    broadcast add), then ``maximum(·, 0)`` when ``relu``: one pass instead of two."""
    rows, f = out.shape
    fu = numba.uint64(f) if ENABLED else f
    for r in range(rows):
        for j in range(fu):
            y = out[r, j]
            if use_bias:
                y = y + bias[j]
            if relu:
                y = _relu(y)
            out[r, j] = y


@_jit
def relu_mask_grad(g: Any, out: Any, grad: Any, gb: Any, want_gb: bool) -> None:
    """``grad = g·(out > 0)`` over (rows, F) (the fused Dense+relu backward's mask: 1 or 0),
    and when ``want_gb`` its column sums into ``gb``, added row after row as numpy's
    ``sum(axis=0)`` adds them (the same floats): the bias gradient in the same pass."""
    rows, f = g.shape
    fu = numba.uint64(f) if ENABLED else f
    for r in range(rows):
        for j in range(fu):
            v = g[r, j] * (_ONE if out[r, j] > _ZERO else _ZERO)
            grad[r, j] = v
        if want_gb:
            if r == 0:
                for j in range(fu):
                    gb[j] = grad[0, j]
            else:
                for j in range(fu):
                    gb[j] += grad[r, j]
