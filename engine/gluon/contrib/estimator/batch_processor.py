"""MXNet's ``gluon.contrib.estimator.batch_processor``, re-exported from
:mod:`engine.gluon.estimator.batch_processor`."""

from ....gluon.estimator.batch_processor import *  # noqa: F403
from ....gluon.estimator.batch_processor import __all__  # noqa: F401
