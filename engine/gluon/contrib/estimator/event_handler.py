"""MXNet's ``gluon.contrib.estimator.event_handler``, re-exported from
:mod:`engine.gluon.estimator.event_handler`."""

from ....gluon.estimator.event_handler import *  # noqa: F403
from ....gluon.estimator.event_handler import __all__  # noqa: F401
