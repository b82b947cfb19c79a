"""Winograd F(2x2, 3x3) for 3x3, stride-1, undilated, ungrouped 2-D convolutions (numpy).

Where numba compiles them and a layer has enough tiles, :mod:`.winograd4`'s F(4x4, 3x3)
takes these convolutions instead (1.78x fewer multiply-adds again); this module serves the
rest: no numba, or too few tiles for F(4x4)'s larger filter transforms.

A 2x2 block of outputs needs 36 multiply-adds per (input, output) channel pair by im2col and
16 here: each 4x4 input tile ``d`` (stride 2) and each filter ``w`` are mapped to a 4x4
"transform domain" (``V = Bᵀ d B``, ``U = G w Gᵀ``), where the convolution becomes 16
independent channel GEMMs ``M[k] = V[k] @ U[k]`` (k = one of the 4x4 points), and the
output block is ``Y = Aᵀ M A`` (Lavin & Gray, "Fast Algorithms for Convolutional Neural
Networks", 2015). The backward is the exact transpose of that product, sharing one
transformed output gradient ``Gy = A dY Aᵀ`` between both gradients:

- weight: ``dU[k] = V[k]ᵀ @ Gy[k]`` (K = all tiles: large, BLAS-efficient GEMMs), then
  ``dw = Gᵀ dU G``;
- data: ``dV[k] = Gy[k] @ U[k]ᵀ``, then ``dd = B dV Bᵀ`` added back into the overlapping tiles.

The data and gradient transforms are a few numpy adds over strided views of the whole batch:
1.3-1.6x faster than the same transforms as GEMMs with the constant 16x16 / 4x16 matrices
(whose entries are 0 and ±1, so a GEMM does mostly no work). Now that numba is a
dependency, float32 runs all four data-sized transforms as fused compiled loops
(:mod:`.conv_kernels`: padding read as zeros, bias added on the way, the data gradient
scattered tile by tile with no padded buffer; 1.9-2.4x faster than these numpy ones, 2 ms per
step of issue 11's CNN). Three do the numpy adds in the same order (the same floats); the
data gradient sums overlapping tiles in another order. The filter transforms
(here and F(4x4)'s) are compiled separable loops, :class:`FilterTransform`'s ``to_domain`` and
``from_domain`` (F(4x4)'s forward Uᵀ and the numba-less path: one GEMM with the
matrix ``G ⊗ G``). float32 results stay within ~1e-6 relative error of a float64
reference, as im2col's do.

Everything works on channels-last data (N, H, W, C); the filters come as rows (F, 9·C) in
(kh, kw, C) order or as the (F, C, 3, 3) weight MXNet stores (:func:`taps_last`), the
layouts of :mod:`.conv_ops`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from . import conv_kernels, cpu_kernels, gemm, kernel_threads
from .kernel_threads import run_tasks

# G maps a 3-tap filter to the 4 transform points (exact in binary floating point)
_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])

# Where the Winograd path pays (measured one layer at a time, 1 thread, bench/conv_paths.py):
# per tile it trades 20 multiply-adds per (input, output) channel pair, C·F, for transforms
# of 16·(C + F) values, so what decides is C·F / (C + F), here as the harmonic mean of the
# channel counts 2·C·F / (C + F). With the compiled transforms, issue 11's Conv(32→64) (43)
# ran 1.2x faster than im2col (F(2x2): 7.4/12.3 ms forward/backward against 8.5/16.3; F(4x4)
# of winograd4.py 6.4/8.4), its Conv(64→128) (85) 1.6x, ResNet's Conv(64→64) (64) 1.2x; a
# 3-channel image (6) 3-4x slower. Below MIN_TILES 4x4 tiles the filter transforms
# (16·F·C values each way) outweigh the savings. With the filters transformed by compiled
# kernels (conv_kernels.filter_transform, 3-5x faster than the GEMM they replaced) F(2x2)
# beat im2col on ResNet-18's 512-channel 4x4 maps at batch 16 (64 tiles: 31 against 44 ms
# forward + backward, 1 thread; 18 against 25 at 2) and on resnet18_v1's 256-channel 2x2
# maps at batch 32 (32 tiles: 4.5 against 5.7 ms; 4.0 against 4.0 at 2 threads).
MIN_HARMONIC_CHANNELS = 40
MIN_TILES = 32

# RUDDER_ENGINE_WINOGRAD picks the fastest algorithms allowed: "4x4" (the default: F(4x4)
# where it applies, else F(2x2)), "2x2" (never F(4x4), whose float32 results are ~10x less
# exact) or "off" (im2col everywhere: the most exact, as MXNet's direct convolution).
WINOGRAD = os.environ.get("RUDDER_ENGINE_WINOGRAD", "4x4").strip().lower()
if WINOGRAD not in ("4x4", "2x2", "off"):
    raise ValueError(f"RUDDER_ENGINE_WINOGRAD={WINOGRAD!r}: expected 4x4, 2x2 or off")
if WINOGRAD == "off":
    MIN_HARMONIC_CHANNELS = 10 ** 9


def applies(xp: Any, kernel: tuple[int, ...], stride: tuple[int, ...],
            dilate: tuple[int, ...], groups: int, shape: tuple[int, ...], filters: int,
            pad: tuple[int, ...]) -> bool:
    """Whether a convolution of channels-last data ``shape`` into ``filters`` channels takes
    the Winograd path (numpy only: the cupy path keeps im2col, whose few large GEMMs a GPU
    runs at full speed)."""
    if xp is not np or kernel != (3, 3) or stride != (1, 1) or dilate != (1, 1) or groups != 1:
        return False
    n, h, w, c = shape
    tiles = n * ((h + 2 * pad[0] - 1) // 2) * ((w + 2 * pad[1] - 1) // 2)
    return 2 * c * filters >= MIN_HARMONIC_CHANNELS * (c + filters) and tiles >= MIN_TILES


def _tiles(arr: Any, th: int, tw: int) -> Any:
    """(4, 4, N, th, tw, C) read-only view of the 4x4 tiles at stride 2 of (N, H, W, C)."""
    s_n, s_h, s_w, s_c = arr.strides
    n, c = arr.shape[0], arr.shape[3]
    return np.lib.stride_tricks.as_strided(
        arr, (4, 4, n, th, tw, c), (s_h, s_w, s_n, 2 * s_h, 2 * s_w, s_c), writeable=False)


def _blocks(arr: Any) -> Any:
    """(2, 2, N, th, tw, C) view of the 2x2 blocks of an even-sized (N, 2th, 2tw, C)."""
    n, h, w, c = arr.shape
    return arr.reshape(n, h // 2, 2, w // 2, 2, c).transpose(2, 4, 0, 1, 3, 5)


def _input_transform(d: Any, out: Any) -> None:
    """``out = Bᵀ d B`` over the two leading 4x4 axes; Bᵀ rows are
    (1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1)."""
    t = np.empty(d.shape, d.dtype)
    np.subtract(d[0], d[2], out=t[0])
    np.add(d[1], d[2], out=t[1])
    np.subtract(d[2], d[1], out=t[2])
    np.subtract(d[1], d[3], out=t[3])
    np.subtract(t[:, 0], t[:, 2], out=out[:, 0])
    np.add(t[:, 1], t[:, 2], out=out[:, 1])
    np.subtract(t[:, 2], t[:, 1], out=out[:, 2])
    np.subtract(t[:, 1], t[:, 3], out=out[:, 3])


def _output_transform(m: Any, out: Any) -> None:
    """``out = Aᵀ m A``: (4, 4, ...) → (2, 2, ...); Aᵀ rows are (1, 1, 1, 0), (0, 1, -1, -1)."""
    s = np.empty((2, *m.shape[1:]), m.dtype)
    np.add(m[0], m[1], out=s[0])
    s[0] += m[2]
    np.subtract(m[1], m[2], out=s[1])
    s[1] -= m[3]
    np.add(s[:, 0], s[:, 1], out=out[:, 0])
    out[:, 0] += s[:, 2]
    np.subtract(s[:, 1], s[:, 2], out=out[:, 1])
    out[:, 1] -= s[:, 3]


def _grad_transform(dy: Any, out: Any) -> None:
    """``out = A dy Aᵀ``: (2, 2, ...) → (4, 4, ...), the transpose of the output transform."""
    t = np.empty((4, *dy.shape[1:]), out.dtype)
    t[0] = dy[0]
    np.add(dy[0], dy[1], out=t[1])
    np.subtract(dy[0], dy[1], out=t[2])
    np.negative(dy[1], out=t[3])
    out[:, 0] = t[:, 0]
    np.add(t[:, 0], t[:, 1], out=out[:, 1])
    np.subtract(t[:, 0], t[:, 1], out=out[:, 2])
    np.negative(t[:, 1], out=out[:, 3])


def _add_input_grad(dv: Any, gpad: Any, th: int, tw: int) -> None:
    """``gpad += B dv Bᵀ`` tile by tile, the transpose of the input transform; the tiles
    overlap by two rows and columns, so the rows are folded first (row 2t of the padded
    gradient collects tile t's row 0 and tile t-1's row 2), then the columns."""
    rest = dv.shape[2:]
    # row stage: B's rows are (1, 0, 0, 0), (0, 1, -1, 1), (-1, 1, 1, 0), (0, 0, 0, -1)
    r = np.empty((4, 4, *rest), dv.dtype)
    r[0] = dv[0]
    np.subtract(dv[1], dv[2], out=r[1])
    r[1] += dv[3]
    np.add(dv[1], dv[2], out=r[2])
    r[2] -= dv[0]
    np.negative(dv[3], out=r[3])
    # fold the overlapping rows: (th + 1) row blocks of 2 padded rows each
    n, c = rest[0], rest[-1]
    rows = np.zeros((2, 4, n, th + 1, tw, c), dv.dtype)
    rows[:, :, :, :th] = r[:2]
    rows[:, :, :, 1:] += r[2:]
    # column stage on the folded rows, then the same fold along columns into gpad
    q = np.empty((4, 2, n, th + 1, tw, c), dv.dtype)
    q[0] = rows[:, 0]
    np.subtract(rows[:, 1], rows[:, 2], out=q[1])
    q[1] += rows[:, 3]
    np.add(rows[:, 1], rows[:, 2], out=q[2])
    q[2] -= rows[:, 0]
    np.negative(rows[:, 3], out=q[3])
    # gpad (N, 2(th+1), 2(tw+1), C) as (row phase, col phase, N, th+1, tw+1, C)
    target = _blocks(gpad).transpose(1, 0, 2, 3, 4, 5)  # (col phase, row phase, ...)
    target[:, :, :, :, :tw] += q[:2]
    target[:, :, :, :, 1:] += q[2:]


class Plan:
    """Shapes of one convolution: data (N, H, W, C), F filters, padding (ph, pw), in
    output blocks of ``block`` x ``block`` (2 here, 4 for :mod:`.winograd4`)."""

    def __init__(self, shape: tuple[int, ...], filters: int, pad: tuple[int, ...],
                 block: int = 2) -> None:
        self.n, self.h, self.w, self.c = shape
        self.f = filters
        self.pad = pad
        self.oh, self.ow = self.h + 2 * pad[0] - 2, self.w + 2 * pad[1] - 2
        self.block = block
        self.th, self.tw = -(-self.oh // block), -(-self.ow // block)
        self.tiles = self.n * self.th * self.tw

    def padded_shape(self) -> tuple[int, int, int, int]:
        """Data padded so every input tile (block + 2 wide) is whole."""
        return (self.n, self.block * self.th + 2, self.block * self.tw + 2, self.c)

    def interior(self) -> tuple[slice, ...]:
        ph, pw = self.pad
        return (slice(None), slice(ph, ph + self.h), slice(pw, pw + self.w), slice(None))


def taps_last(filters: Any, c: int) -> Any:
    """A 3x3 weight as (F, C, 9), a view: from rows (F, 9·C) (channels-last taps), or a
    (F, C, 3, 3) weight as stored, or already (F, C, 9)."""
    if filters.ndim == 2:
        return filters.reshape(filters.shape[0], 9, c).transpose(0, 2, 1)
    if filters.ndim == 4:
        return filters.reshape(filters.shape[0], c, 9)
    return filters


def compiled_filters(arr: Any) -> bool:
    """Whether the compiled filter transforms apply: numba and a float32/64 numpy array."""
    return cpu_kernels.ENABLED and type(arr) is np.ndarray \
        and arr.dtype in (np.float32, np.float64)


class FilterTransform:
    """A Winograd G (m x 3) and its filter transforms both ways, with what they derive from
    G (``G ⊗ G``, each in float32 and float64) made once, not on every layer call."""

    def __init__(self, g: Any) -> None:
        self.m = g.shape[0]
        gg = np.kron(g, g)  # (m², 9): a 3x3 filter, row-major, to the m x m points
        self._g = {np.dtype(t): g.astype(t) for t in (np.float32, np.float64)}
        self._gg = {np.dtype(t): gg.astype(t) for t in (np.float32, np.float64)}

    def to_domain(self, filters: Any, c: int, transposed: bool = False,
                  out: Any | None = None) -> Any:
        """Filters → U (m², F, C) = ``G w Gᵀ`` per filter and channel, or with
        ``transposed`` Uᵀ (m², C, F), into ``out`` when given (allocated when None);
        ``filters``: rows (F, 9·C) or taps last (F, C, 9), see :func:`taps_last`.

        U (the data gradient's operand) comes from the compiled kernel. Uᵀ, F(4x4)'s forward
        operand, stays one product by ``G ⊗ G``, the forward's floats as they were: with the
        kernel's rounding of U in that product, the zoo-import test's float32 gradients (a
        batch-4 network whose BatchNorm beta gradients are cancelling sums, so one flipped
        ReLU moves them by percents) were off by 1% in 6 of 116 slightly rescaled inputs,
        against 1 of 116 with these floats, though both forwards are equally exact (1.8e-6
        rms against float64): unexplained, so not taken."""
        w = taps_last(filters, c)
        f, m = w.shape[0], self.m
        shape = (m * m, c, f) if transposed else (m * m, f, c)
        u = np.empty(shape, dtype=w.dtype) if out is None else out
        if compiled_filters(w) and not transposed:
            conv_kernels.filter_transform(w, self._g[w.dtype], u)
            return u
        if transposed and cpu_kernels.available(w):  # (9, C, F), in cache-sized blocks
            taps = np.empty((9, c, f), dtype=w.dtype)
            conv_kernels.taps_transposed(w, taps)
        else:
            order = (2, 1, 0) if transposed else (2, 0, 1)  # (9, C, F) or (9, F, C)
            taps = np.ascontiguousarray(w.transpose(order))
        taps = taps.reshape(9, f * c)
        gemm.matmul(self._gg[w.dtype], taps, u.reshape(m * m, f * c))
        return u

    def from_domain(self, du: Any, out: Any | None = None) -> Any:
        """A filter gradient dU (m², F, C) → ``Gᵀ dU G`` per filter and channel: as rows
        (F, 9·C), or into ``out``, rows or the weight's own (F, C, 3, 3) (returned)."""
        _, f, c = du.shape
        if out is None:
            out = np.empty((f, 9 * c), dtype=du.dtype)
        if compiled_filters(du):
            conv_kernels.filter_transform_grad(du, self._g[du.dtype], taps_last(out, c))
            return out
        gw = gemm.matmul(self._gg[du.dtype].T, du.reshape(du.shape[0], -1))  # (9, F·C)
        taps_last(out, c)[...] = gw.reshape(9, f, c).transpose(1, 2, 0)
        return out


def gradient_products(filters: FilterTransform, gy: Any, v: Any, u: Any, need_gx: bool,
                      shape: tuple[int, ...] | None = None,
                      out: Any | None = None) -> tuple[Any, Any | None]:
    """A Winograd layer's backward products from its output gradient's transform gy
    (m², tiles, F): the weight gradient (:func:`weight_gradient`), and with ``need_gx`` the
    data gradient's transform dV = gy U (m², tiles, C), else None.

    With a data gradient the weight gradient may be queued for another thread (see
    :func:`weight_gradient`); without one it is the whole backward, better shared out than
    left to one other thread."""
    gw = weight_gradient(filters, gy, v, shape, out, may_defer=need_gx)
    if not need_gx:
        return gw, None
    dv = np.empty((gy.shape[0], gy.shape[1], v.shape[2]), dtype=v.dtype)
    gemm.planes(gy, u, dv)
    return gw, dv


def weight_gradient(filters: FilterTransform, gy: Any, v: Any,
                    shape: tuple[int, ...] | None = None, out: Any | None = None,
                    may_defer: bool = True) -> Any:
    """A Winograd layer's weight gradient ``Gᵀ (Σ gyᵀ v) G`` from its output gradient's
    transform gy (m², tiles, F) and its data's v (m², tiles, C): as rows (F, 9·C), or in the
    weight's own ``shape`` (F, C, 3, 3) (into ``out``, a C-ordered array of that shape, when
    given).

    Inside a :func:`.kernel_threads.deferring` backward (and ``may_defer``) its plane
    products and filter transform are queued for another thread and the array is returned
    at once, to be filled before the backward ends: nothing in the backward reads it.
    Otherwise they run now, on all the threads."""
    planes, _, f = gy.shape
    c = v.shape[2]
    gw = np.empty((f, 9 * c) if shape is None else shape, dtype=v.dtype) if out is None \
        else out
    du = np.empty((planes, f, c), dtype=v.dtype)
    tasks = gemm.planes_tasks(gy.transpose(0, 2, 1), v, du)

    def products_and_transform() -> None:
        for task in tasks:
            task()
        filters.from_domain(du, gw)

    if not (may_defer and kernel_threads.defer(products_and_transform, gw)):
        run_tasks(tasks)
        filters.from_domain(du, gw)
    return gw


FILTERS = FilterTransform(_G)


def weight_transform(filters: Any, c: int, out: Any | None = None) -> Any:
    """Filters (rows (F, 9·C), or taps last, :func:`taps_last`) → U (16, F, C): ``G w Gᵀ``
    per filter and channel (into ``out`` when given)."""
    return FILTERS.to_domain(filters, c, out=out)


# prepare(kind, transform): transform(filters, out) with out None or a buffer to fill
Prepare = Callable[[str, Callable[..., Any]], Any]


def transformed_now(filters: Any) -> Prepare:
    """A ``prepare`` for :func:`forward` that transforms ``filters`` when asked (a
    convolution may instead hand out transforms queued ahead, engine.ndarray.weight_prep)."""
    return lambda kind, transform: transform(filters, out=None)


def forward(plan: Plan, xl: Any, filters: Any, bias: Any | None,
            prepare: Prepare | None = None) -> tuple[Any, Any, Any]:
    """Output (N, OH, OW, F) channels-last for ``filters`` (rows (F, 9·C) or taps last, see
    winograd.taps_last), with the transformed data V (16, tiles, C) and
    filters U (16, F, C) that the backward reuses. ``prepare(kind, transform)`` gives
    ``transform(filters)`` (by default computed then)."""
    compiled = cpu_kernels.available(xl, filters) and (bias is None
                                                     or cpu_kernels.available(bias))
    v = np.empty((4, 4, plan.n, plan.th, plan.tw, plan.c), dtype=xl.dtype)
    if compiled:  # the same floats, without the padded copy
        conv_kernels.winograd_input_transform(xl, *plan.pad, v)
    else:
        xpad = np.zeros(plan.padded_shape(), dtype=xl.dtype)
        xpad[plan.interior()] = xl
        _input_transform(_tiles(xpad, plan.th, plan.tw), v)
    v = v.reshape(16, plan.tiles, plan.c)
    u = (prepare or transformed_now(filters))("winograd2.U", partial(weight_transform, c=plan.c))
    u = u.astype(xl.dtype, copy=False)
    m = np.empty((16, plan.tiles, plan.f), dtype=xl.dtype)
    # U's transposed view: storing Uᵀ (as winograd4 does) cost more than it saved here,
    # with 16 planes against 36 (measured on ResNet's 4x4 maps)
    gemm.planes(v, u.transpose(0, 2, 1), m)
    out = np.empty((plan.n, 2 * plan.th, 2 * plan.tw, plan.f), dtype=xl.dtype)
    m = m.reshape(4, 4, plan.n, plan.th, plan.tw, plan.f)
    if compiled:
        conv_kernels.winograd_output_transform(  # out[0, 0, 0]: an unread (F,) stand-in
            m, out[0, 0, 0] if bias is None else bias, bias is not None, out)
    else:
        _output_transform(m, _blocks(out))
        if bias is not None:
            out += bias.reshape(1, 1, 1, plan.f).astype(out.dtype, copy=False)
    return out[:, :plan.oh, :plan.ow], v, u


def backward(plan: Plan, gl: Any, v: Any, u: Any, need_gx: bool,
             shape: tuple[int, ...] | None = None,
             out: Any | None = None) -> tuple[Any, Any | None]:
    """Gradients for output gradient ``gl`` (N, OH, OW, F) channels-last: the weight's as
    rows (F, 9·C), or in its own ``shape`` (F, C, 3, 3) when given (into ``out`` when
    given), and, if ``need_gx``, the data's (N, H, W, C) channels-last."""
    if (plan.oh, plan.ow) != (2 * plan.th, 2 * plan.tw):  # odd output: pad to whole blocks
        even = np.zeros((plan.n, 2 * plan.th, 2 * plan.tw, plan.f), dtype=gl.dtype)
        even[:, :plan.oh, :plan.ow] = gl
        gl = even
    gy = np.empty((4, 4, plan.n, plan.th, plan.tw, plan.f), dtype=v.dtype)
    compiled = cpu_kernels.available(gl, v)
    if compiled:
        conv_kernels.winograd_grad_transform(gl, gy)
    else:
        _grad_transform(_blocks(gl), gy)
    gy = gy.reshape(16, plan.tiles, plan.f)
    gw, dv = gradient_products(FILTERS, gy, v, u, need_gx, shape, out)
    if dv is None:
        return gw, None
    dv = dv.reshape(4, 4, plan.n, plan.th, plan.tw, plan.c)
    if compiled:
        gx = np.empty((plan.n, plan.h, plan.w, plan.c), dtype=v.dtype)
        conv_kernels.winograd_input_grad(dv, *plan.pad, gx)
        return gw, gx
    gpad = np.zeros(plan.padded_shape(), dtype=v.dtype)
    _add_input_grad(dv, gpad, plan.th, plan.tw)
    return gw, gpad[plan.interior()]
