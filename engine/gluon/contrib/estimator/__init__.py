"""``gluon.contrib.estimator``: MXNet 1.9's import path of the Estimator, its event handlers
and batch processor. The implementation is :mod:`engine.gluon.estimator`; its submodules
(``estimator``, ``event_handler``, ``batch_processor``) are importable here too, as the
same modules.

>>> from engine.gluon.contrib.estimator import Estimator
>>> from engine.gluon.contrib.estimator.event_handler import LoggingHandler
>>> Estimator.__module__, LoggingHandler.__module__
('engine.gluon.estimator.estimator', 'engine.gluon.estimator.event_handler')
"""

import sys

from ...estimator import *  # noqa: F403 - the same public names at MXNet's path
from ...estimator import (
    __all__,  # noqa: F401
    batch_processor,
    estimator,
    event_handler,
)

# ``import engine.gluon.contrib.estimator.event_handler`` finds the same module objects
for _module in (batch_processor, estimator, event_handler):
    sys.modules[f"{__name__}.{_module.__name__.rsplit('.', 1)[1]}"] = _module
