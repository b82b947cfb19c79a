"""The one place that chooses between numpy and cupy.

Every engine function that touches raw arrays asks ``array_module(x)`` (Chainer's
``get_array_module`` idiom) instead of importing numpy or cupy itself, so there is a
single device-agnostic code path. cupy is imported here, guarded, and nowhere else.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy

try:  # cupy is optional: the `gpu` extra installs it, and a GPU must be present.
    import cupy as _cupy

    try:
        _GPU_COUNT = int(_cupy.cuda.runtime.getDeviceCount())
    except Exception:  # cupy installed but no driver/device: behave as CPU-only.
        _GPU_COUNT = 0
    cupy: ModuleType | None = _cupy if _GPU_COUNT else None
except ImportError:  # pragma: no cover - depends on the machine
    cupy = None
    _GPU_COUNT = 0


def gpu_count() -> int:
    """Number of CUDA devices cupy can see (0 without cupy)."""
    return _GPU_COUNT


def array_module(x: Any) -> ModuleType:
    """numpy or cupy, whichever owns the raw array ``x``."""
    if cupy is not None and isinstance(x, cupy.ndarray):
        return cupy
    return numpy


def module_for(device_type: str) -> ModuleType:
    """The array module that backs a context's device type."""
    if device_type == "gpu":
        if cupy is None:
            raise RuntimeError(
                "a gpu context needs cupy and a CUDA device; on a machine with an NVIDIA "
                "GPU, scripts/gpu-setup installs the cupy built for its CUDA version"
            )
        return cupy
    return numpy


def to_numpy(x: Any) -> numpy.ndarray:
    """A host (numpy) copy or view of a raw array from either backend."""
    if cupy is not None and isinstance(x, cupy.ndarray):
        return cupy.asnumpy(x)
    return numpy.asarray(x)
