"""Run an elementwise update rule on the engine's threads, one contiguous chunk per thread.

numpy ufuncs and the compiled rules release the GIL, so an elementwise rule over a large flat
buffer splits into independent chunks that the engine's threads
(engine.ndarray.kernel_threads) update at the same time. The results are bit-identical to
one call over the whole buffer, whatever the split (each element sees the same operations
and scalars), so the chunks may follow the thread count. Only used on numpy buffers of at
least ``MIN_ELEMENTS`` with scalar coefficients; ``RUDDER_OPTIMIZER_THREADS`` overrides the
number of chunks (``1`` turns the split off).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import Any

from ..ndarray import kernel_threads

MIN_ELEMENTS = 1 << 17


def thread_count() -> int:
    """Chunks to split into: RUDDER_OPTIMIZER_THREADS, else the engine's thread count."""
    configured = os.environ.get("RUDDER_OPTIMIZER_THREADS", "").strip()
    return max(1, int(configured)) if configured.isdigit() else kernel_threads.count()


def slice_state(state: Any, start: int, stop: int) -> Any:
    if state is None:
        return None
    if isinstance(state, tuple):
        return tuple(slice_state(s, start, stop) for s in state)
    return state[start:stop]


def run_chunked(size: int, work: Callable[[int, int], None]) -> bool:
    """Call ``work(start, stop)`` over chunks of ``range(size)`` in parallel.

    Returns False (and does nothing) when parallelism would not pay off.
    """
    if size < MIN_ELEMENTS:
        return False
    threads = min(thread_count(), size // (MIN_ELEMENTS // 2))
    if threads < 2:
        return False
    bounds = [size * k // threads for k in range(threads + 1)]
    # Chunk starts on a 64-byte boundary for float32/float64 alike (cache-line friendly).
    bounds = [b - b % 16 if 0 < b < size else b for b in bounds]
    kernel_threads.run_tasks([partial(work, bounds[k], bounds[k + 1]) for k in range(threads)])
    return True
