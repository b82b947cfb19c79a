"""``mx.runtime``: which build features this engine has (``mx.runtime.Features()``).

The feature names are MXNet 1.9.1's, so ``Features().is_enabled('CUDA')`` answers the same
question MXNet code asks; the answers describe this engine (CUDA means cupy found a GPU).

>>> from engine import runtime
>>> runtime.Features().is_enabled('CPU_SSE') in (True, False)
True
"""

from __future__ import annotations

import collections

from . import backend

__all__ = ["Feature", "Features", "feature_list"]

_NAMES = (
    "CUDA", "CUDNN", "NCCL", "CUDA_RTC", "TENSORRT", "CPU_SSE", "CPU_SSE2", "CPU_SSE3",
    "CPU_SSE4_1", "CPU_SSE4_2", "CPU_SSE4A", "CPU_AVX", "CPU_AVX2", "OPENMP", "SSE", "F16C",
    "JEMALLOC", "BLAS_OPEN", "BLAS_ATLAS", "BLAS_MKL", "BLAS_APPLE", "LAPACK", "MKLDNN",
    "OPENCV", "CAFFE", "PROFILER", "DIST_KVSTORE", "CXX14", "INT64_TENSOR_SIZE", "SIGNAL_HANDLER",
    "DEBUG", "TVM_OP",
)


class Feature(collections.namedtuple("Feature", ["name", "enabled"])):
    """One build feature and whether it is available."""

    def __repr__(self) -> str:
        return f"{'✔' if self.enabled else '✖'} {self.name}"


def _enabled() -> set[str]:
    on = {"CPU_SSE", "CPU_SSE2", "CPU_SSE3", "SSE", "BLAS_OPEN", "LAPACK", "CXX14",
          "INT64_TENSOR_SIZE", "SIGNAL_HANDLER"}
    if backend.gpu_count():
        on |= {"CUDA"}
    return on


def feature_list() -> list[Feature]:
    """Every known feature with its state."""
    on = _enabled()
    return [Feature(name, name in on) for name in _NAMES]


class Features(collections.OrderedDict):
    """The features, by name: ``Features().is_enabled('CUDA')``."""

    def __init__(self) -> None:
        super().__init__((f.name, f) for f in feature_list())

    def __repr__(self) -> str:
        return str(list(self.values()))

    def is_enabled(self, feature_name: str) -> bool:
        name = feature_name.upper()
        if name not in self:
            raise RuntimeError(f"Feature '{name}' is unknown, known features are: {list(self)}")
        return bool(self[name].enabled)
