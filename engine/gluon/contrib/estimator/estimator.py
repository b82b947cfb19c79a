"""MXNet's ``gluon.contrib.estimator.estimator``, re-exported from
:mod:`engine.gluon.estimator.estimator`."""

from ....gluon.estimator.estimator import *  # noqa: F403
from ....gluon.estimator.estimator import __all__  # noqa: F401
