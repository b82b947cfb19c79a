"""``engine.nd``: MXNet's imperative NDArray API on numpy (cupy on GPU).

>>> from engine import nd
>>> nd.dot(nd.ones((2, 3)), nd.ones((3, 4))).shape
(2, 4)
"""

from __future__ import annotations

from typing import Any

from . import allocator as _allocator
from . import random
from .conv_ops import Convolution  # noqa: F401 - exported as nd.Convolution etc.
from .creation import (
    arange,
    array,
    empty,
    eye,
    full,
    full_like,
    linspace,
    load,
    ones,
    ones_like,
    save,
    waitall,
    zeros,
    zeros_like,
)
from .deconv_ops import Deconvolution  # noqa: F401
from .ndarray import NDArray, apply_op
from .nn_ops import activation as Activation  # noqa: N812 - MXNet's operator names
from .nn_ops import dropout as Dropout  # noqa: N812
from .nn_ops import fully_connected as FullyConnected  # noqa: N812
from .nn_ops import leaky_relu as LeakyReLU  # noqa: N812
from .nn_ops import log_softmax, one_hot, softmax
from .norm_ops import BatchNorm, Embedding, LayerNorm  # noqa: F401 - nd.BatchNorm etc.
from .ops import argmax as _argmax
from .ops import argmin as _argmin
from .ops import (
    batch_dot,
    binary,
    clip,
    dot,
    norm,
    prod,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_sum,
    stop_gradient,
    unary,
    where,
)
from .pool_ops import Pooling  # noqa: F401
from .shape_ops import (
    concat,
    expand_dims,
    flatten,
    pick,
    repeat,
    reshape,
    split,
    squeeze,
    stack,
    swapaxes,
    take,
    tile,
    transpose,
)

_allocator.keep_freed_memory()  # reuse big temporaries across steps (see allocator.py)
BlockGrad = stop_gradient
Flatten = flatten
Concat = concat


def sum(data: NDArray, axis: Any = None, keepdims: bool = False, exclude: bool = False):  # noqa: A001
    return reduce_sum(data, axis, keepdims, exclude)


def mean(data: NDArray, axis: Any = None, keepdims: bool = False, exclude: bool = False):
    return reduce_mean(data, axis, keepdims, exclude)


def max(data: NDArray, axis: Any = None, keepdims: bool = False):  # noqa: A001
    return reduce_max(data, axis, keepdims)


def min(data: NDArray, axis: Any = None, keepdims: bool = False):  # noqa: A001
    return reduce_min(data, axis, keepdims)


def argmax(data: NDArray, axis: int | None = None, keepdims: bool = False) -> NDArray:
    return _argmax(data, axis, keepdims)


def argmin(data: NDArray, axis: int | None = None, keepdims: bool = False) -> NDArray:
    return _argmin(data, axis, keepdims)


def _unary_fn(name: str):
    def fn(data: NDArray) -> NDArray:
        return unary(name, data)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{name}`` (differentiable)."
    return fn


def _binary_fn(name: str, op: str):
    def fn(lhs: Any, rhs: Any) -> NDArray:
        return binary(op, lhs, rhs)

    fn.__name__ = name
    fn.__doc__ = f"Broadcasting ``{op}`` (differentiable)."
    return fn


relu = _unary_fn("relu")
sigmoid = _unary_fn("sigmoid")
tanh = _unary_fn("tanh")
exp = _unary_fn("exp")
log = _unary_fn("log")
log1p = _unary_fn("log1p")
expm1 = _unary_fn("expm1")
sqrt = _unary_fn("sqrt")
rsqrt = _unary_fn("rsqrt")
square = _unary_fn("square")
reciprocal = _unary_fn("reciprocal")
abs = _unary_fn("abs")  # noqa: A001
sign = _unary_fn("sign")
negative = _unary_fn("negative")
sin = _unary_fn("sin")
cos = _unary_fn("cos")
floor = _unary_fn("floor")
ceil = _unary_fn("ceil")
round = _unary_fn("round")  # noqa: A001
softsign = _unary_fn("softsign")

add = broadcast_add = elemwise_add = _binary_fn("add", "add")
subtract = broadcast_sub = broadcast_minus = elemwise_sub = _binary_fn("subtract", "sub")
multiply = broadcast_mul = elemwise_mul = _binary_fn("multiply", "mul")
divide = broadcast_div = elemwise_div = _binary_fn("divide", "div")
power = broadcast_power = _binary_fn("power", "pow")
maximum = broadcast_maximum = _binary_fn("maximum", "maximum")
minimum = broadcast_minimum = _binary_fn("minimum", "minimum")


def broadcast_to(data: NDArray, shape: Any) -> NDArray:
    return data.broadcast_to(shape)


def broadcast_like(lhs: NDArray, rhs: NDArray) -> NDArray:
    return lhs.broadcast_to(rhs.shape)


def softmax_cross_entropy(data: NDArray, label: NDArray) -> NDArray:
    """Sum over the batch of ``-log softmax(data)[label]`` (MXNet's operator)."""
    from .nn_ops import softmax_cross_entropy_sparse

    return reduce_sum(softmax_cross_entropy_sparse(data, label, axis=-1))


__all__ = [name for name in dir() if not name.startswith("_")]
