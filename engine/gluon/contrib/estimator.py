"""``gluon.contrib.estimator``: MXNet 1.9's import path of the Estimator and its event
handlers; the implementation is :mod:`engine.gluon.estimator`, re-exported unchanged.

>>> from engine.gluon.contrib.estimator import Estimator, LoggingHandler
>>> Estimator.__module__
'engine.gluon.estimator.estimator'
"""

from ..estimator import *  # noqa: F403 - the same public names at MXNet's path
from ..estimator import __all__  # noqa: F401
