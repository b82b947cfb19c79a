"""The engine as the worker sees it: imported by name and typed as ``Any``.

mypy checks api/, core/ and workers/ but not engine/; importing the engine dynamically
keeps the service's type check independent of the engine's internal annotations, while
the engine's own tests check its behaviour. Submodules are imported eagerly so a missing
piece fails at worker start, not in the middle of a job.
"""

from __future__ import annotations

import importlib
from typing import Any

_SUBMODULES = (
    "engine.gluon",
    "engine.gluon.nn",
    "engine.gluon.loss",
    "engine.gluon.data",
    "engine.gluon.estimator",
    "engine.initializer",
    "engine.optimizer",
    "engine.lr_scheduler",
    "engine.metric",
    "engine.random",
)

engine: Any = importlib.import_module("engine")
for _name in _SUBMODULES:
    importlib.import_module(_name)
