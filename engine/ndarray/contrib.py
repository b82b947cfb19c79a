"""``nd.contrib``: MXNet's contributed operators the engine supports.

>>> from engine import nd
>>> nd.contrib.isnan(nd.array([1.0, float('nan')])).asnumpy().tolist()
[0.0, 1.0]
"""

from __future__ import annotations

import math
from typing import Any

import numpy

from .math_ops import isfinite, isinf, isnan
from .ndarray import NDArray, as_raw
from .shape_ops import getitem

__all__ = ["arange_like", "boolean_mask", "div_sqrt_dim", "index_copy", "isfinite", "isinf",
           "isnan", "rand_zipfian"]


def boolean_mask(data: NDArray, index: NDArray, axis: int = 0, **_: Any) -> NDArray:
    """The rows (along ``axis``) of ``data`` where ``index`` is non-zero."""
    rows = data.xp.nonzero(as_raw(index).reshape(-1) != 0)[0]
    key = [slice(None)] * data.ndim
    key[axis] = NDArray(rows, data.context)
    return getitem(data, tuple(key))


def index_copy(old_tensor: NDArray, index_vector: NDArray, new_tensor: NDArray,
               **_: Any) -> NDArray:
    """A copy of ``old_tensor`` with rows ``index_vector`` replaced by ``new_tensor``."""
    out = old_tensor._data.copy()
    out[as_raw(index_vector).astype(numpy.int64)] = as_raw(new_tensor)
    return NDArray(out, old_tensor.context)


def arange_like(data: NDArray, start: float = 0.0, step: float = 1.0, repeat: int = 1,
                axis: int | None = None, **_: Any) -> NDArray:
    """``arange`` with the size (and shape, when ``axis`` is None) of ``data``."""
    n = data.size if axis is None else data.shape[axis]
    values = start + step * (numpy.arange(n) // repeat)
    values = values.reshape(data.shape) if axis is None else values
    return NDArray(data.xp.asarray(values.astype(data.dtype)), data.context)


def div_sqrt_dim(data: NDArray, **_: Any) -> NDArray:
    """``data / √(last dimension)``."""
    return data / math.sqrt(data.shape[-1])


def rand_zipfian(true_classes: NDArray, num_sampled: int, range_max: int,
                 ctx: Any = None) -> tuple[NDArray, NDArray, NDArray]:
    """``num_sampled`` classes in [0, range_max) drawn with replacement from the log-uniform
    (Zipfian) distribution ``P(c) = log((c + 2) / (c + 1)) / log(range_max + 1)``, and the
    expected counts of ``true_classes`` and of the samples (float64), as MXNet's op."""
    from .. import random as _random

    log_range = math.log(range_max + 1)
    draws = _random.generator().uniform(0.0, log_range, num_sampled)
    samples = (numpy.exp(draws).astype(numpy.int64) - 1) % range_max

    def expected(classes: numpy.ndarray) -> numpy.ndarray:
        c = classes.astype(numpy.float64)
        return numpy.log((c + 2.0) / (c + 1.0)) / log_range * num_sampled

    ctx = ctx or true_classes.context
    true = numpy.asarray(as_raw(true_classes.asnumpy()))
    return (NDArray(ctx.xp.asarray(samples), ctx), NDArray(ctx.xp.asarray(expected(true)), ctx),
            NDArray(ctx.xp.asarray(expected(samples)), ctx))
