"""``engine.gluon.contrib.nn``: MXNet 1.9.1's contributed layers (see :mod:`.basic_layers`).

>>> import engine as mx
>>> mx.gluon.contrib.nn.Identity()(mx.nd.ones((2,))).asnumpy().tolist()
[1.0, 1.0]
"""

from . import basic_layers
from .basic_layers import (
    Concurrent,
    HybridConcurrent,
    Identity,
    PixelShuffle1D,
    PixelShuffle2D,
    PixelShuffle3D,
    SyncBatchNorm,
)

__all__ = ["Concurrent", "HybridConcurrent", "Identity", "PixelShuffle1D", "PixelShuffle2D",
           "PixelShuffle3D", "SyncBatchNorm", "basic_layers"]
