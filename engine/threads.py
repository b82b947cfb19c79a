"""How many CPU threads the engine computes with, decided before numpy and numba load.

The engine's compiled kernels, its own task pool and OpenBLAS all compute with one thread
count, ``count()``, taken from the first of:

1. ``RUDDER_ENGINE_THREADS`` (a worker's setting lands here);
2. ``OMP_NUM_THREADS`` (the usual cap a process sets for its numeric libraries);
3. the cores this process is given: its CPU affinity mask, capped by a cgroup CPU quota
   (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``), rounded down (a container given 2.5 CPUs gets
   2 threads: a third one would be throttled), at least 1.

Results do not depend on the count: every kernel splits its work into a fixed partition that
depends only on the shapes (engine.ndarray.kernel_threads), so a run resumed on a machine
with another core count continues bit for bit.

OpenBLAS computes on **one** thread in an engine process: its multi-threaded GEMMs change
their floats with the thread count (engine.ndarray.gemm), so the engine splits its products
itself, and a second set of threads would only compete with the engine's for the cores.
BLAS and OpenMP read their settings when they load, so importing this module (engine/__init__
does, right after engine.blas_kernels, before numpy) sets ``OPENBLAS_NUM_THREADS=1`` where the
environment does not set it, and ``NUMBA_NUM_THREADS`` to at least the count (numba's pool
size; the count can only be lowered below it later); where numpy was loaded first, or the
environment asks OpenBLAS for more threads, engine.ndarray.kernel_threads lowers it to 1 at
run time (threadpoolctl). This module imports only the standard library.

>>> cores_from_quota("150000 100000"), cores_from_quota("max 100000")
(1, None)
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Decision", "apply", "available_cores", "cores_from_quota", "decision", "describe"]

SETTING = "RUDDER_ENGINE_THREADS"
_CGROUP = Path("/sys/fs/cgroup")
_PROC_CGROUP = Path("/proc/self/cgroup")


@dataclass(frozen=True)
class Decision:
    """The thread count and where it came from (for a worker's start log)."""

    threads: int
    reason: str
    blas_preset: bool = False  # OpenBLAS may have loaded with more than one thread


def cores_from_quota(cpu_max: str) -> int | None:
    """Whole CPUs of a cgroup v2 ``cpu.max`` line (``"<quota> <period>"``), None without one."""
    parts = cpu_max.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    quota, period = int(parts[0]), int(parts[1])
    return max(1, math.floor(quota / period)) if quota > 0 and period > 0 else None


def _ancestors(base: Path, path: str) -> list[Path]:
    """``base/path`` and each directory above it up to ``base`` (a parent's quota binds too)."""
    parts = [p for p in path.strip().split("/") if p]
    return [base.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]


def _cgroup_quota() -> int | None:
    """Whole CPUs of the tightest CPU quota on this process's cgroup or one above it (v2
    ``cpu.max``, v1 ``cpu.cfs_quota_us``), None when there is none."""
    try:
        lines = _PROC_CGROUP.read_text().splitlines()
    except OSError:
        return None
    quotas: list[int] = []
    try:
        for line in lines:
            quotas += _quotas_of(line)
    except (OSError, ValueError):  # unreadable or malformed: no quota we can trust
        return None
    return min(quotas) if quotas else None


def _quotas_of(line: str) -> list[int]:
    """The CPU quotas (whole CPUs) along one ``/proc/self/cgroup`` line's hierarchy."""
    _, controllers, path = line.split(":", 2)
    if not controllers:  # v2, mounted alone or beside v1 as "unified"
        base = _CGROUP if (_CGROUP / "cgroup.controllers").exists() else _CGROUP / "unified"
        files = [d / "cpu.max" for d in _ancestors(base, path)]
        texts = [f.read_text() for f in files if f.is_file()]
    elif "cpu" in controllers.split(","):
        base = _CGROUP / controllers if (_CGROUP / controllers).is_dir() else _CGROUP / "cpu"
        texts = [f"{(d / 'cpu.cfs_quota_us').read_text().strip()} "
                 f"{(d / 'cpu.cfs_period_us').read_text().strip()}".replace("-1 ", "max ")
                 for d in _ancestors(base, path) if (d / "cpu.cfs_quota_us").is_file()]
    else:
        return []
    return [q for q in map(cores_from_quota, texts) if q is not None]


def available_cores() -> tuple[int, str]:
    """The cores this process may compute on, and how that was found."""
    try:
        affinity = len(os.sched_getaffinity(0))
        how = f"{affinity} CPUs in its affinity mask"
    except AttributeError:  # pragma: no cover - not Linux
        affinity = os.cpu_count() or 1
        how = f"{affinity} CPUs"
    quota = _cgroup_quota()
    if quota is not None and quota < affinity:
        return quota, f"cgroup CPU quota of {quota} (of {how})"
    return affinity, how


def _from_environment(environ: Mapping[str, str]) -> Decision:
    for variable in (SETTING, "OMP_NUM_THREADS"):
        value = environ.get(variable, "").strip()
        if value:
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"{variable}={value!r}: expected a whole number of threads >= 1")
            return Decision(int(value), f"{variable}={value}")
    cores, how = available_cores()
    return Decision(cores, f"the cores this process is given: {how}")


_DECISION: Decision | None = None


def apply() -> Decision:
    """Decide the thread count once per process and set the libraries' variables for it."""
    global _DECISION
    if _DECISION is None:
        chosen = _from_environment(os.environ)
        preset = "numpy" in sys.modules or os.environ.get("OPENBLAS_NUM_THREADS", "1") != "1" \
            or bool(os.environ.get("GOTO_NUM_THREADS"))
        _DECISION = Decision(chosen.threads, chosen.reason, preset)
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        if not os.environ.get("NUMBA_NUM_THREADS"):
            os.environ["NUMBA_NUM_THREADS"] = str(max(_DECISION.threads, os.cpu_count() or 1))
    return _DECISION


def decision() -> Decision:
    """The count decided when the engine was imported (see :func:`apply`)."""
    return apply()


def describe() -> str:
    """One line for a log: how many threads the engine computes with, and why."""
    chosen = decision()
    return f"engine threads: {chosen.threads} ({chosen.reason})"


apply()  # on import: engine/__init__ imports this module before anything that loads numpy
