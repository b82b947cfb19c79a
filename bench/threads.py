"""One thread cap for every implementation a benchmark compares.

BLAS and OpenMP read their thread counts when they load, so a benchmark calls
``cap_threads()`` before it imports numpy; the anchors' subprocesses get the same cap, and the
engine computes with as many threads (``RUDDER_ENGINE_THREADS``, engine/threads.py; it keeps
OpenBLAS itself at one thread and splits its work over its own threads).
Default 1: on a shared 2-core machine single-threaded figures are far steadier; pass
``--threads 2`` for the multi-threaded comparison.

It also lets the engine pick numpy's OpenBLAS kernels before numpy loads, as a Rudder worker
does (engine/blas_kernels.py); the anchors' subprocesses inherit the same OPENBLAS_CORETYPE.
``RUDDER_BLAS_CORETYPE=inherit`` measures with the environment's kernels instead.
"""

from __future__ import annotations

import os
import sys

# the last one is the engine's own thread count (engine/threads.py)
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
               "RUDDER_ENGINE_THREADS")


def cap_threads(default: int = 1) -> int:
    """Read ``--threads N`` from the command line (or use ``default``) and apply it."""
    threads = default
    argv = sys.argv[1:]
    for i, arg in enumerate(argv):
        if arg.startswith("--threads="):
            threads = int(arg.split("=", 1)[1])
        elif arg == "--threads" and i + 1 < len(argv):
            threads = int(argv[i + 1])
    for var in THREAD_VARS:
        os.environ[var] = str(threads)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # before numpy: picks OpenBLAS's kernels and the engine's thread count
    from engine import blas_kernels
    from engine import threads as engine_threads

    print(blas_kernels.describe(), flush=True)
    print(engine_threads.describe(), flush=True)
    return threads
