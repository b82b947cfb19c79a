"""``hybridize()`` for Gluon: trace a HybridBlock's forward once per input signature and
replay it as a static program with reused buffers and fused kernels.

Modules: :mod:`.trace` (recording ``F`` calls), :mod:`.kernels` (fused steps),
:mod:`.program` (the compiled program and its backward), :mod:`.cached` (per-block cache
and the imperative fallback).
"""

from .cached import CachedGraph
from .trace import current_tracer

__all__ = ["CachedGraph", "current_tracer"]
