"""The engine pieces a worker uses, imported eagerly and typed.

A plain import (mypy sees the engine's own annotations across the worker↔engine seam);
the submodules are imported here so a missing piece fails at worker start, not in the
middle of a job. Worker modules ``import engine`` directly; this module is what the
worker process imports first (workers/celery_app.py, bench/service_loop.py).
"""

from __future__ import annotations

import engine
import engine.gluon
import engine.gluon.data
import engine.gluon.estimator
import engine.gluon.loss
import engine.gluon.nn
import engine.initializer
import engine.lr_scheduler
import engine.metric
import engine.optimizer
import engine.random
import engine.threads
from engine.ndarray import kernel_threads

__all__ = ["engine", "kernel_threads"]
