"""Matrix products on the engine's threads, split by a partition that the shapes fix.

OpenBLAS's own threads do not give the same floats for every thread count: measured here
(OpenBLAS 0.3.31, numpy 2.4), a (128, 784) @ (784, 256) sgemm, and others with a long inner
dimension, changed in the last bits between 1, 2, 3 and 4 BLAS threads; splitting one
product into row or column blocks changes the floats of some shapes too (its small-matrix
kernels sum in another order). So the engine keeps OpenBLAS at one thread
(engine.threads) and splits the products on the training path itself, into blocks that
depend on the shapes only, as tasks on its own threads (:func:`.kernel_threads.run_tasks`):
the same sub-products, the same floats, for any thread count.

- :func:`matmul`: ``out = a @ b`` in blocks of ``out``'s rows (``ROW_BLOCK``) and columns
  (``COL_BLOCK``); a product too small for two blocks runs as one call, as before.
- :func:`matmul_k`: ``a @ b`` for a long inner dimension and a small result (a weight
  gradient summed over every pixel of a batch): one partial product per block of
  ``K_BLOCK`` of the inner dimension, added up in block order.
- :func:`planes`: ``out[k] = a[k] @ b[k]`` for a stack of planes (a Winograd layer's
  transform domain): one batched product per thread over a run of whole planes.

>>> import numpy as np
>>> a, b = np.ones((3, 4), np.float32), np.ones((4, 2), np.float32)
>>> matmul(a, b).tolist()
[[4.0, 4.0], [4.0, 4.0], [4.0, 4.0]]
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from ..backend import array_module
from .kernel_threads import count, run_tasks

# Block sizes: large enough that the operand each block packs again (OpenBLAS packs the
# other operand per call) costs little beside its arithmetic, and that a block's work
# (at least MIN_BLOCK_FLOPS) dwarfs the fixed cost of a call and of handing it to a thread
# (at one thread, 8 MFLOP blocks made an MLP's 50 MFLOP products ~10% slower than one
# call each; 32 MFLOP blocks keep them whole).
ROW_BLOCK = 512
COL_BLOCK = 256
K_BLOCK = 8192
MIN_BLOCK_FLOPS = 1 << 25
# A product of at least SPLIT_FLOPS that the floors above leave whole is halved (each half
# still MIN_BLOCK_FLOPS), along a side of at least 2x SPLIT_MIN_SIDE.
SPLIT_FLOPS = 1 << 26
SPLIT_MIN_SIDE = 64
# A product with at most THIN_SIDE columns (a batch by a weight, swapped: (F, K) @ (K, N))
# streams the weight once whatever the split: from THIN_SPLIT_FLOPS on it runs as 2 blocks
# of rows, from SPLIT_FLOPS on as 4. Measured (one/two threads, us): (512, 512) @ (512, 32)
# whole 180/183, 2 blocks 167/114; (512, 1024) @ (1024, 32) 313/310, 311/208; (512, 2304) @
# (2304, 32) in 2 blocks 732/524, in 4 762/426 (Sapphire Rapids VM).
THIN_SIDE = 64
THIN_SPLIT_FLOPS = 1 << 24


def bounds(size: int, block: int, balanced: bool = False) -> list[tuple[int, int]]:
    """``size`` split into ``size // block`` near-equal blocks (one when it is under two),
    as (start, stop) pairs; ``balanced``: more than two blocks become a multiple of four
    (at most ``size``), which 2 and 4 threads share out evenly (3 blocks of a network input
    layer's product kept one of 2 threads idle for a third of it)."""
    count = max(1, size // block)
    if balanced and count > 2:
        count = min(size, -(-count // 4) * 4)
    edges = [size * i // count for i in range(count + 1)]
    return list(zip(edges[:-1], edges[1:], strict=True))


def _at_least(flops_per_unit: int, floor: int) -> int:
    return max(floor, -(-MIN_BLOCK_FLOPS // max(flops_per_unit, 1)))


def _grid(a: Any, b: Any, out: Any) -> list[Callable[[], Any]]:
    (m, k), n = a.shape, out.shape[1]
    return [partial(np.matmul, a[r0:r1], b[:, c0:c1], out=out[r0:r1, c0:c1])
            for r0, r1, c0, c1 in _blocks(m, k, n)]


@functools.lru_cache(maxsize=4096)
def _blocks(m: int, k: int, n: int) -> tuple[tuple[int, int, int, int], ...]:
    """The (row start, row stop, column start, column stop) blocks of an (m, k) @ (k, n)
    product (a training step asks for the same few shapes every time: cached)."""
    rows = bounds(m, _at_least(2 * k * n, ROW_BLOCK), balanced=True)
    cols = bounds(n, _at_least(2 * k * (rows[0][1] - rows[0][0]), COL_BLOCK))
    if len(rows) == len(cols) == 1 and n <= THIN_SIDE and m >= 2 * SPLIT_MIN_SIDE \
            and 2 * m * k * n >= THIN_SPLIT_FLOPS:
        # a batch's product by a weight (the swapped form of matmul below): each block of
        # the weight's rows is read once either way, and the thin operand packed again
        # costs little, so it splits at a quarter of SPLIT_FLOPS
        rows = bounds(m, m // (4 if 2 * m * k * n >= SPLIT_FLOPS else 2))
    elif len(rows) == len(cols) == 1 and 2 * m * k * n >= SPLIT_FLOPS:
        # A large product under both floors (a deep layer on small maps: 128 rows of 2304
        # by 256) would run on one thread: halve its wider side.
        if n >= m and n >= 2 * SPLIT_MIN_SIDE:
            cols = bounds(n, n // 2)
        elif m >= 2 * SPLIT_MIN_SIDE:
            rows = bounds(m, m // 2)
    return tuple((r0, r1, c0, c1) for r0, r1 in rows for c0, c1 in cols)


# A product of at most this many rows by a transposed view (``x @ W.T``, W stored (out, in):
# a Dense layer's forward, a 1-pixel map's) runs with the operands' roles swapped, as
# ``(W @ x.T).T``: OpenBLAS's SkylakeX kernels took 1.3-1.6x longer for the first form
# (32 x 512 by 512 x 512: 0.43 against 0.28 ms, one thread; 128 rows: the same either way).
SWAP_MAX_ROWS = 64


def matmul(a: Any, b: Any, out: Any | None = None) -> Any:
    """``a @ b`` into ``out`` (allocated when None): for 2-D numpy arrays on the engine's
    threads in blocks of rows and columns fixed by the shapes; anything else (cupy, N-d)
    as the array module's own ``matmul``."""
    if not (type(a) is np.ndarray and type(b) is np.ndarray and a.ndim == b.ndim == 2):
        return a @ b if out is None else array_module(a).matmul(a, b, out=out)
    if out is None:
        out = np.empty((a.shape[0], b.shape[1]), dtype=np.result_type(a, b))
    if a.shape[0] <= SWAP_MAX_ROWS < b.shape[1] and b.T.flags.c_contiguous \
            and not b.flags.c_contiguous:  # by the shapes and layouts alone, as the blocks
        np.copyto(out, matmul(b.T, a.T).T)
        return out
    if len(_blocks(a.shape[0], a.shape[1], b.shape[1])) == 1:
        np.matmul(a, b, out=out)  # one block: no task list to build
    else:
        run_tasks(_grid(a, b, out))
    return out


def matmul_tasks(a: Any, b: Any, out: Any) -> list[Callable[[], Any]]:
    """:func:`matmul` into ``out`` as its tasks (to run beside other work)."""
    return _grid(a, b, out)


def matmul_k(a: Any, b: Any) -> Any:
    """``a @ b`` with the inner dimension split into blocks of ``K_BLOCK``: each block's
    partial product is a task, then the partials are added in block order."""
    tasks, finish = matmul_k_tasks(a, b)
    run_tasks(tasks)
    return finish()


def matmul_k_tasks(a: Any, b: Any) -> tuple[list[Callable[[], Any]], Callable[[], Any]]:
    """:func:`matmul_k` as its tasks (to run beside other work in one :func:`run_tasks`)
    and the call that adds the partials up once they ran."""
    ks = bounds(a.shape[1], K_BLOCK)
    dtype = np.result_type(a, b)
    parts = [np.empty((a.shape[0], b.shape[1]), dtype) for _ in ks]
    tasks: list[Callable[[], Any]] = []
    for (k0, k1), part in zip(ks, parts, strict=True):
        tasks += _grid(a[:, k0:k1], b[k0:k1], part)
    return tasks, partial(sum_in_order, parts)


def sum_in_order(parts: Any) -> Any:
    """The partial products ``parts`` added up in their order, into the first (the floats
    depend on the partition only, never on which thread made which part)."""
    total = parts[0]
    for part in parts[1:]:
        total += part
    return total


def planes(a: Any, b: Any, out: Any) -> Any:
    """``out[k] = a[k] @ b[k]`` for every plane ``k`` of 3-D numpy stacks: see
    :func:`planes_tasks`."""
    run_tasks(planes_tasks(a, b, out))
    return out


def planes_tasks(a: Any, b: Any, out: Any) -> list[Callable[[], Any]]:
    """:func:`planes` as its tasks: one batched ``np.matmul`` per engine thread over a
    contiguous run of planes.

    numpy computes a batched product as one BLAS call per plane, with the same arguments
    whichever run the plane falls in, so the floats do not depend on the split (the tests
    hold the layers to that on 1, 2 and 3 threads). One call per thread rather than one per
    plane: the 36 GEMMs of an 8x8 map's F(4x4) layer take ~10 us each, about what handing a
    task to a thread and taking the GIL back costs, and two threads on per-plane tasks ran
    them 1.1x faster than one thread (measured on a 2-core VM)."""
    size = a.shape[0]
    parts = max(1, min(count(), size))
    edges = [size * i // parts for i in range(parts + 1)]
    return [partial(np.matmul, a[p0:p1], b[p0:p1], out=out[p0:p1])
            for p0, p1 in zip(edges[:-1], edges[1:], strict=True)]
