"""``mx.npx``: the numpy-extension operators MXNet 2.x code calls (a small subset).

>>> import engine as mx
>>> mx.npx.set_np()
>>> mx.npx.relu(mx.nd.array([-1.0, 2.0])).asnumpy().tolist()
[0.0, 2.0]
"""

from __future__ import annotations

from typing import Any

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


def set_np(shape: bool = True, array: bool = True, dtype: bool = False) -> None:
    """Accepted for compatibility: Rudder has one array type for nd and np."""


def reset_np() -> None:
    """Accepted for compatibility (see :func:`set_np`)."""


def is_np_array() -> bool:
    return False


def is_np_shape() -> bool:
    return False


def use_np(func: Any) -> Any:
    """Decorator accepted for compatibility; returns ``func`` unchanged."""
    return func


def seed(seed_state: int, ctx: Any = "all") -> None:
    from . import random

    random.seed(seed_state, ctx)
