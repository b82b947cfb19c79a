"""``engine.gluon.contrib``: MXNet 1.9.1's contributed Gluon pieces that Rudder provides:
``contrib.nn`` (Concurrent, Identity, PixelShuffle*, SyncBatchNorm) and ``contrib.estimator``
(the same Estimator as ``engine.gluon.estimator``).

>>> import engine as mx
>>> mx.gluon.contrib.estimator.Estimator is mx.gluon.estimator.Estimator
True
"""

from . import estimator, nn

__all__ = ["estimator", "nn"]
