"""``gluon.contrib.estimator``: MXNet 1.9's import path of the Estimator, its event handlers
and batch processor, with MXNet's submodules (``estimator``, ``event_handler``,
``batch_processor``); the implementation is :mod:`engine.gluon.estimator`, re-exported.

>>> from engine.gluon.contrib.estimator import Estimator
>>> from engine.gluon.contrib.estimator.event_handler import LoggingHandler
>>> Estimator.__module__, LoggingHandler.__module__
('engine.gluon.estimator.estimator', 'engine.gluon.estimator.event_handler')
"""

from ...estimator import *  # noqa: F403 - the same public names at MXNet's path
from ...estimator import __all__  # noqa: F401
from . import batch_processor, estimator, event_handler  # noqa: F401 - MXNet's submodules
