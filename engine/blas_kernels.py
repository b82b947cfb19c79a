"""Which OpenBLAS kernels numpy's matrix products run on: the CPU's own, where we can choose.

numpy's OpenBLAS is built for many CPUs and picks its kernels once, when numpy is loaded:
from the ``OPENBLAS_CORETYPE`` environment variable if set, else from the CPU. An environment
that pins an older family (``OPENBLAS_CORETYPE=Haswell`` on a CPU with AVX-512, as images that
want one setting for a mixed fleet do) halves the speed of every GEMM: measured on an AMD EPYC
with AVX-512, single-thread sgemm ran at 115 GFLOP/s on Haswell kernels and 214 on SkylakeX.

The engine therefore replaces a pinned family that is *older* than what the CPU runs, before
numpy loads: importing this module calls :func:`apply`, ``engine/__init__`` imports it first,
and the worker imports the engine before anything that loads numpy.
``RUDDER_BLAS_CORETYPE`` says what to do:

- ``auto`` (default): keep OpenBLAS's own detection when nothing is pinned; replace a pinned
  family older than the CPU's with the CPU's; never touch a pin that is as new or newer;
- ``inherit``: never touch ``OPENBLAS_CORETYPE`` (bit-for-bit the same kernels as the rest of
  the fleet, whatever they cost);
- a core name (``SkylakeX``, ``Haswell``, ...): use that one.

This module imports only the standard library: it must run before numpy is imported.

>>> plan({"OPENBLAS_CORETYPE": "Haswell"}, {"avx2", "fma", *AVX512}).coretype
'SkylakeX'
>>> plan({"OPENBLAS_CORETYPE": "Haswell", "RUDDER_BLAS_CORETYPE": "inherit"},
...      {"avx2", "fma", *AVX512}).coretype
'Haswell'
>>> plan({}, {"avx2", "fma", *AVX512}).coretype is None   # OpenBLAS detects the CPU itself
True
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

__all__ = ["AVX512", "Decision", "apply", "cpu_flags", "decision", "describe", "native_coretype",
           "plan"]

SETTING = "RUDDER_BLAS_CORETYPE"
OPENBLAS_VAR = "OPENBLAS_CORETYPE"

# the AVX-512 subsets OpenBLAS's SkylakeX kernels use
AVX512 = frozenset({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"})

# OpenBLAS x86-64 core names by the vector width of their GEMM kernels (lower case); names not
# listed rank 0 (SSE-era kernels)
_GENERATION = {
    **dict.fromkeys(("sandybridge", "bulldozer", "piledriver", "steamroller"), 1),  # AVX
    **dict.fromkeys(("haswell", "zen", "excavator"), 2),  # AVX2 + FMA
    **dict.fromkeys(("skylakex", "cooperlake", "sapphirerapids"), 3),  # AVX-512
}


@dataclass(frozen=True)
class Decision:
    """What :func:`plan` chose: the ``OPENBLAS_CORETYPE`` to set (None: leave it) and why."""

    coretype: str | None
    inherited: str | None
    reason: str

    @property
    def changes(self) -> bool:
        return self.coretype is not None and self.coretype != self.inherited


def cpu_flags() -> frozenset[str]:
    """The instruction-set flags of this machine's first CPU (Linux; empty elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            for line in info:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def native_coretype(flags: frozenset[str] | set[str]) -> str | None:
    """The newest OpenBLAS kernel family these CPU flags run, or None when unknown."""
    if AVX512 <= flags:
        return "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    if "avx" in flags:
        return "Sandybridge"
    return None


def plan(environ: Mapping[str, str], flags: frozenset[str] | set[str]) -> Decision:
    """Decide ``OPENBLAS_CORETYPE`` from the setting, the inherited value and the CPU."""
    inherited = environ.get(OPENBLAS_VAR) or None
    setting = (environ.get(SETTING) or "auto").strip()
    if setting.lower() == "inherit":
        return Decision(inherited, inherited, f"{SETTING}=inherit")
    if setting.lower() != "auto":
        return Decision(setting, inherited, f"{SETTING}={setting}")
    native = native_coretype(frozenset(flags))
    if inherited is None:
        return Decision(None, None, "OpenBLAS detects the CPU itself")
    if native is None:
        return Decision(inherited, inherited, "CPU flags unknown: the pinned kernels are kept")
    if _GENERATION.get(inherited.lower(), 0) < _GENERATION[native.lower()]:
        return Decision(native, inherited,
                        f"{OPENBLAS_VAR}={inherited} is older than this CPU's {native} kernels")
    return Decision(inherited, inherited, f"{OPENBLAS_VAR}={inherited} kept")


_DECISION: Decision | None = None


def apply(environ: MutableMapping[str, str] | None = None) -> Decision:
    """Set ``OPENBLAS_CORETYPE`` for this process (and its children) per :func:`plan`.

    Only effective before numpy is imported: OpenBLAS reads the variable when it loads. After
    that the decision is still recorded (``applied`` is False in :func:`decision`'s reason).
    """
    global _DECISION
    if environ is None and _DECISION is not None:
        return _DECISION  # once per process: a second call would see its own choice as a pin
    env = os.environ if environ is None else environ
    chosen = plan(env, cpu_flags())
    if chosen.changes and chosen.coretype is not None:
        if "numpy" in sys.modules:
            chosen = Decision(chosen.inherited, chosen.inherited,
                              chosen.reason + "; numpy was already loaded, so it stays")
        else:
            env[OPENBLAS_VAR] = chosen.coretype
    if environ is None:
        _DECISION = chosen
    return chosen


def decision() -> Decision:
    """What this process decided (:func:`apply` ran when the engine was imported)."""
    return _DECISION if _DECISION is not None else apply()


def describe() -> str:
    """One line for a log: which kernels and why."""
    chosen = decision()
    kernels = chosen.coretype or "detected by OpenBLAS"
    return f"OpenBLAS kernels: {kernels} ({chosen.reason})"


apply()  # on import: engine/__init__ imports this module before anything that loads numpy
