"""Run an elementwise update rule on several CPU cores, one contiguous chunk per thread.

numpy ufuncs release the GIL, so an elementwise rule over a large flat buffer splits into
independent chunks that threads update at the same time. The results are bit-identical to
one call over the whole buffer (each element sees the same operations and scalars).
Only used on numpy buffers of at least ``MIN_ELEMENTS`` with scalar coefficients; set
``RUDDER_OPTIMIZER_THREADS=1`` to turn it off. Without it, a cap the process set for its
numeric libraries (``OMP_NUM_THREADS``) caps these threads too, so "1 thread" means one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

MIN_ELEMENTS = 1 << 17
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def thread_count() -> int:
    """Threads to use: RUDDER_OPTIMIZER_THREADS, else OMP_NUM_THREADS, else the CPUs this
    process may run on (≤ 8)."""
    for variable in ("RUDDER_OPTIMIZER_THREADS", "OMP_NUM_THREADS"):
        configured = os.environ.get(variable, "").strip()
        if configured.isdigit():
            return max(1, int(configured))
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 8))


def _executor(workers: int) -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None or _pool._max_workers < workers:  # noqa: SLF001 - sizing check
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rudder-opt")
        return _pool


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
    threads = thread_count()
    if threads < 2:
        return False
    threads = min(threads, size // (MIN_ELEMENTS // 2))
    if threads < 2:
        return False
    bounds = [size * k // threads for k in range(threads + 1)]
    # Chunk starts on a 64-byte boundary for float32/float64 alike (cache-line friendly).
    bounds = [b - b % 16 if 0 < b < size else b for b in bounds]
    pool = _executor(threads - 1)
    futures = [pool.submit(work, bounds[k], bounds[k + 1]) for k in range(1, threads)]
    work(bounds[0], bounds[1])  # the calling thread takes the first chunk
    for future in futures:
        future.result()
    return True
