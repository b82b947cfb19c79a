"""A convolution of maps smaller than its kernel as one dense product.

When the input map has fewer pixels than the kernel has positions (a 3x3 convolution of 2x2
maps, as in ResNet's last stage on 32x32 images), most kernel positions of every output
pixel fall on padding. im2col then multiplies the weights by those zeros (9 positions per
output where 4 read data), and Winograd F(2x2) spends as long on its transforms as on its
products. Here the whole layer is instead one matrix ``D`` of shape (H·W·C, OH·OW·F): block
(input pixel p, output pixel q) holds the weights of the one kernel position that takes p to
q (zeros where none does), so the forward is ``x (N, H·W·C) @ D``, the data gradient
``g @ Dᵀ``, and the weight gradient ``xᵀ @ g`` folded back onto the kernel positions. The
products are plain GEMMs on the engine's threads (engine.ndarray.gemm: a fixed partition,
the same floats for any thread count), and their multiply-adds are H·W per output pixel and
channel pair, against KH·KW for im2col: 2.25x fewer for a 3x3 kernel on 2x2 maps. ``D`` is
built, and the weight gradient folded, by compiled passes over the filters.

``D`` reads the weight alone: a hybridized forward builds it ahead on another thread
(engine.ndarray.weight_prep), as it does Winograd's filter transforms.

>>> import numpy as np
>>> plan = Plan((2, 2), (2, 2), (3, 3), (1, 1), (1, 1), (1, 1))
>>> len(plan.pairs), plan.full   # every input pixel reaches every output pixel
(16, True)
>>> w = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
>>> plan.matrix(w, None)[0].tolist()   # Dᵀ: output (0, 0) reads taps 4, 5, 7, 8
[4.0, 5.0, 7.0, 8.0]
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache
from typing import Any

import numpy as np

from . import gemm
from .kernel_threads import kernel, prange


def applies(sizes: tuple[int, ...], kernel: tuple[int, ...]) -> bool:
    """Whether a convolution of ``sizes`` maps takes this path: at most half as many input
    pixels as kernel positions (its products then do at most half of im2col's work, and
    ``D`` holds at most KH·KW/2 times the weights per output pixel)."""
    return 2 * math.prod(sizes) <= math.prod(kernel)


class Plan:
    """Which kernel position joins each (input pixel, output pixel) pair of a geometry."""

    def __init__(self, sizes: tuple[int, ...], out_sizes: tuple[int, ...],
                 kernel: tuple[int, ...], stride: tuple[int, ...], dilate: tuple[int, ...],
                 pad: tuple[int, ...]) -> None:
        self.out_sizes = out_sizes
        self.hw = math.prod(sizes)
        self.ohow = math.prod(out_sizes)
        self.kk = math.prod(kernel)
        self.pairs = _pairs(sizes, out_sizes, kernel, stride, dilate, pad)
        self.full = len(self.pairs) == self.hw * self.ohow  # no zero blocks in D

    def matrix(self, w: Any, out: Any, last: bool = False) -> Any:
        """``Dᵀ`` (OH·OW·F, H·W·C) of the weight ``w`` ((F, C, *K), or (F, *K, C) when
        ``last``), into ``out`` unless None. Stored transposed: a row (output pixel, filter)
        then reads one filter's weights, which lie together in the weight; the forward's
        ``x @ D`` is then a product by a transposed view, which engine.ndarray.gemm runs as
        ``(Dᵀ xᵀ)ᵀ`` for a batch of at most 64."""
        f, c = w.shape[0], w.shape[-1] if last else w.shape[1]
        dt = np.empty((self.ohow * f, self.hw * c), dtype=w.dtype) if out is None else out
        _fill_dense(w.reshape(f, -1, c) if last else w.reshape(f, c, -1), last, self.pairs,
                    self.full, dt)
        return dt

    def weight_gradient(self, x2: Any, g2: Any, shape: tuple[int, ...], last: bool,
                        out: Any) -> Any:
        """The weight gradient, in the weight's ``shape`` (into ``out`` unless None), for
        data ``x2`` (N, H·W·C) and output gradient ``g2`` (N, OH·OW·F): ``g2ᵀ @ x2`` with
        each kernel position's blocks added up in a fixed order."""
        f = shape[0]
        c = shape[-1] if last else shape[1]
        gdt = gemm.matmul(g2.T, x2)  # (OH·OW·F, H·W·C)
        gw = np.empty(shape, dtype=gdt.dtype) if out is None else out
        _fold_dense(gdt, last, self.pairs, gw.reshape(f, -1, c) if last else gw.reshape(f, c, -1))
        return gw


# Both passes read or write the weight where its layout puts it: with the kernel positions
# innermost (F, C, KK), a tap's values for one filter lie KK apart. Each pair's channels are
# read (or added up) straight from there, strided on the weight's side and contiguous on
# D's: copying each filter into a (KK, C) block first, a scalar transpose, took 1.4x as long
# on ResNet's 2x2 maps (256 channels, 16 pairs) and 2.5x on a stride-2 layer's 4 pairs.
# Each pair's run of C values on D's side is taken as a 1-D view, indexed from 0, and the
# layout test stays outside the channel loop: indexing D at ``p·C + c`` (numba then checks
# every index for wrap-around) with the tap as a view whose layout depends on ``last`` made
# the loop generic and scalar: 1.8x slower for the fill (0.65 against 0.37 ms) and 1.5x for
# the fold (0.70 against 0.47 ms), 256 channels on 2x2 maps, one thread of a Sapphire Rapids
# VM; on two threads 0.45 against 0.19 and 0.41 against 0.24 ms.
@kernel
def _fill_dense(w3: Any, last: bool, pairs: Any, full: bool, dt: Any) -> None:
    """``dt[q·F + f, p·C + c] = w[f, c, k]`` for every (p, q, k) of ``pairs``; zeros where
    no pair reaches unless ``full``. ``w3`` is (F, C, KK), or (F, KK, C) when ``last``."""
    f_ = w3.shape[0]
    c_ = w3.shape[2] if last else w3.shape[1]
    ohow = dt.shape[0] // f_
    for f in prange(f_):  # one filter's rows per block: the weights it reads lie together
        if not full:
            for q in range(ohow):
                dt[q * f_ + f, :] = 0
        for i in range(pairs.shape[0]):
            p, q, k = pairs[i, 0], pairs[i, 1], pairs[i, 2]
            block = dt[q * f_ + f, p * c_:(p + 1) * c_]
            if last:
                for c in range(c_):
                    block[c] = w3[f, k, c]
            else:
                for c in range(c_):
                    block[c] = w3[f, c, k]


@kernel
def _fold_dense(gdt: Any, last: bool, pairs: Any, gw3: Any) -> None:
    """``gw[f, c, k] = Σ gdt[q·F + f, p·C + c]`` over the pairs (p, q, k), in their order:
    the same floats for any thread count. ``gw3`` as ``_fill_dense``'s ``w3``."""
    f_ = gw3.shape[0]
    c_ = gw3.shape[2] if last else gw3.shape[1]
    for f in prange(f_):
        gw3[f] = 0
        for i in range(pairs.shape[0]):
            p, q, k = pairs[i, 0], pairs[i, 1], pairs[i, 2]
            block = gdt[q * f_ + f, p * c_:(p + 1) * c_]
            if last:
                for c in range(c_):
                    gw3[f, k, c] += block[c]
            else:
                for c in range(c_):
                    gw3[f, c, k] += block[c]


@lru_cache(maxsize=256)
def _pairs(sizes: tuple[int, ...], out_sizes: tuple[int, ...], kernel: tuple[int, ...],
           stride: tuple[int, ...], dilate: tuple[int, ...], pad: tuple[int, ...]) -> Any:
    """(input pixel, output pixel, kernel position) for every kernel position that reads
    data, all flat row-major indices, in a fixed order (rows of an int64 array). Along each
    axis an input index determines the kernel index for a given output index, so no pair
    repeats."""
    found = []
    for q, out_at in enumerate(itertools.product(*(range(o) for o in out_sizes))):
        for tap, k_at in enumerate(itertools.product(*(range(k) for k in kernel))):
            at = [o * s - p + k * d
                  for o, s, p, k, d in zip(out_at, stride, pad, k_at, dilate, strict=True)]
            if all(0 <= i < n for i, n in zip(at, sizes, strict=True)):
                found.append((int(np.ravel_multi_index(at, sizes)), q, tap))
    pairs = np.array(found, dtype=np.int64).reshape(-1, 3)
    pairs.flags.writeable = False  # shared by every plan of this geometry
    return pairs


__all__ = ["Plan", "applies"]
