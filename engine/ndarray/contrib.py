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
           "isnan"]


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
