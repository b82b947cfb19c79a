"""Rudder's training engine: MXNet Gluon's training API on numpy (cupy on GPU).

MXNet code runs with one changed import::

    import engine as mx
    from engine import nd, autograd, gluon

Submodules are imported on first use, so ``import engine`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

# first, before anything imports numpy: importing these picks OpenBLAS's kernels and the
# thread count of BLAS, numba and the engine's own pool (see the modules)
from . import blas_kernels, threads

# isort: split
from . import autograd, base, nd, random
from . import np as np
from .base import MXNetError
from .context import Context, cpu, cpu_pinned, current_context, gpu, num_gpus
from .distributed.roles import exit_if_not_a_worker
from .ndarray import NDArray

# MXNet's launcher also starts the script as servers and a scheduler; Rudder needs neither
exit_if_not_a_worker()

# The MXNet release whose behaviour the engine mirrors (code checks mx.__version__ for it);
# Rudder's own version is __rudder_version__.
__version__ = "1.9.1"
__rudder_version__ = "0.1.0"

_LAZY = {
    "gluon": "engine.gluon",
    "optimizer": "engine.optimizer",
    "lr_scheduler": "engine.lr_scheduler",
    "initializer": "engine.initializer",
    "init": "engine.initializer",
    "kvstore": "engine.kvstore",
    "kv": "engine.kvstore",
    "metric": "engine.metric",
    "callback": "engine.callback",
    "io": "engine.io",
    "recordio": "engine.recordio",
    "image": "engine.image",
    "img": "engine.image",
    "module": "engine.module",
    "mod": "engine.module",
    "symbol": "engine.symbol",
    "sym": "engine.symbol",
    "model": "engine.model",
    "npx": "engine.npx",
    "test_utils": "engine.test_utils",
    "runtime": "engine.runtime",
    "util": "engine.util",
    "name": "engine.name",
    "attribute": "engine.attribute",
    "mon": "engine.monitor",
    "monitor": "engine.monitor",
    "context": "engine.context",
    "ndarray": "engine.ndarray",
    "numpy": "engine.np",
    "numpy_extension": "engine.npx",
    "rnd": "engine.random",
}
_LAZY_NAMES = {  # classes and functions, not modules
    "AttrScope": ("engine.attribute", "AttrScope"),
    **{name: ("engine.util", name) for name in (
        "is_np_array", "is_np_shape", "np_array", "set_np_shape", "use_np", "use_np_array",
        "use_np_shape")},
}


def np_shape(active: bool = True) -> Any:
    """A scope with numpy shape semantics (``mx.np_shape``); see :mod:`engine.util`."""
    from .util import np_shape as scope

    return scope(active)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name])
        globals()[name] = module
        return module
    if name in _LAZY_NAMES:
        module_name, attribute = _LAZY_NAMES[name]
        value = getattr(importlib.import_module(module_name), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'engine' has no attribute {name!r}")


__all__ = [
    "Context", "MXNetError", "NDArray", "autograd", "base", "cpu", "cpu_pinned",
    "current_context", "gpu",
    "nd", "np", "np_shape", "num_gpus", "random", *_LAZY, *_LAZY_NAMES,
]
