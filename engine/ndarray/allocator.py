"""Keep freed array memory in the process so the next training step reuses it.

Every step allocates the same large temporaries (im2col matrices, activations, gradients).
glibc's malloc serves blocks above a sliding threshold with fresh ``mmap`` pages and returns
them to the OS on free, so each step pays a page fault per 4 KiB touched: on issue 11's CNN
(batch 64) that was ~8,500 faults and ~27 ms of kernel time per ~137 ms step. Raising the
mmap and trim thresholds makes those blocks come from, and go back to, the heap, as MXNet's
pooled storage manager and PyTorch's caching allocator keep theirs (0 faults per step).

The cost is that the process keeps up to its peak working set mapped between steps. Set
``RUDDER_ENGINE_KEEP_FREED_MEMORY=0`` to leave malloc as it is. Only glibc is tuned; other
C libraries are left alone.

>>> from engine.ndarray import allocator
>>> allocator.keep_freed_memory() in (True, False)
True
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_MAX = 32 * 1024 * 1024  # glibc's ceiling on 64-bit systems
_TRIM_THRESHOLD = 1024 * 1024 * 1024


def keep_freed_memory() -> bool:
    """Tune glibc malloc to keep freed blocks up to 32 MiB; True when it was applied."""
    if os.environ.get("RUDDER_ENGINE_KEEP_FREED_MEMORY", "1") == "0":
        return False
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    applied = mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX) == 1
    return mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD) == 1 and applied
