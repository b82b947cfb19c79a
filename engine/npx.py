"""``mx.npx``: the numpy-extension operators MXNet 2.x code calls (a small subset).

>>> import engine as mx
>>> mx.npx.set_np()
>>> mx.npx.relu(mx.nd.array([-1.0, 2.0])).asnumpy().tolist()
[0.0, 2.0]
>>> mx.npx.reset_np()

``set_np``/``reset_np`` and the ``is_np_*`` queries are ``engine.util``'s: under ``set_np()``
operators keep 0-d results, as MXNet's numpy arrays do.
"""

from __future__ import annotations

from typing import Any

from . import util as _util
from .ndarray import nn_ops, ops
from .ndarray.conv_ops import convolution, pooling
from .ndarray.ndarray import NDArray
from .ndarray.norm_ops import batch_norm, embedding, layer_norm

softmax = nn_ops.softmax
log_softmax = nn_ops.log_softmax
one_hot = nn_ops.one_hot
activation = nn_ops.activation
leaky_relu = nn_ops.leaky_relu
fully_connected = nn_ops.fully_connected
dropout = nn_ops.dropout
pick = ops.pick
convolution = convolution
pooling = pooling
batch_norm = batch_norm
layer_norm = layer_norm
embedding = embedding


def relu(data: NDArray) -> NDArray:
    return ops.unary("relu", data)


def sigmoid(data: NDArray) -> NDArray:
    return ops.unary("sigmoid", data)


set_np = _util.set_np
reset_np = _util.reset_np
is_np_array = _util.is_np_array
is_np_shape = _util.is_np_shape
use_np = _util.use_np


def seed(seed_state: int, ctx: Any = "all") -> None:
    from . import random

    random.seed(seed_state, ctx)
