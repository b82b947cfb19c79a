"""Gluon helpers: ``split_data``, ``split_and_load`` (data parallelism over contexts) and
``clip_global_norm``.

>>> import engine as mx
>>> parts = mx.gluon.utils.split_and_load(mx.nd.arange(6).reshape((6, 1)),
...                                       [mx.cpu(0), mx.cpu(1)])
>>> [p.shape for p in parts], parts[1].context
([(3, 1), (3, 1)], cpu(1))
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy

from ..context import Context
from ..ndarray.ndarray import NDArray


def split_data(data: NDArray, num_slice: int, batch_axis: int = 0,
               even_split: bool = True) -> list[NDArray]:
    """Split ``data`` into ``num_slice`` pieces along ``batch_axis``."""
    size = data.shape[batch_axis]
    if even_split and size % num_slice != 0:
        raise ValueError(
            f"data with shape {data.shape} cannot be evenly split into {num_slice} slices along "
            f"axis {batch_axis}. Use a batch size that's multiple of {num_slice} or set "
            "even_split=False to allow uneven partitioning of data."
        )
    if num_slice == 1:
        return [data]
    if size < num_slice:
        raise ValueError(
            f"Too many slices for data with shape {data.shape}. Arguments are "
            f"num_slice={num_slice} and batch_axis={batch_axis}."
        )
    each, extras = divmod(size, num_slice)
    bounds = numpy.cumsum([0] + [each + 1] * extras + [each] * (num_slice - extras))
    out = []
    for i in range(num_slice):
        index: list[Any] = [slice(None)] * data.ndim
        index[batch_axis] = slice(int(bounds[i]), int(bounds[i + 1]))
        out.append(data[tuple(index)])
    return out


def split_and_load(data: Any, ctx_list: Sequence[Context], batch_axis: int = 0,
                   even_split: bool = True) -> list[NDArray]:
    """Split ``data`` along ``batch_axis`` and put one slice on each context."""
    if not isinstance(data, NDArray):
        from .. import nd

        data = nd.array(data, ctx=ctx_list[0])
    if len(ctx_list) == 1:
        return [data.as_in_context(ctx_list[0])]
    slices = split_data(data, len(ctx_list), batch_axis, even_split)
    return [s.as_in_context(c) for s, c in zip(slices, ctx_list, strict=True)]


def clip_global_norm(arrays: Sequence[NDArray], max_norm: float,
                     check_isfinite: bool = True) -> Any:
    """Scale ``arrays`` in place so their joint L2 norm is at most ``max_norm``; returns the
    norm before clipping (a float, or an NDArray when ``check_isfinite=False``)."""
    if not arrays:
        raise ValueError("clip_global_norm needs at least one array")
    total_sq = 0.0
    for arr in arrays:
        raw = arr.raw
        total_sq += float((raw.astype(numpy.float64) ** 2).sum())
    total = math.sqrt(total_sq)
    if check_isfinite and not math.isfinite(total):
        warnings.warn("nan or inf is detected. Clipping results will be undefined.",
                      UserWarning, stacklevel=2)
    scale = min(1.0, max_norm / (total + 1e-8))
    if scale < 1.0:
        with numpy.errstate(invalid="ignore"):  # inf * 0 is the documented undefined result
            for arr in arrays:
                arr.raw *= arr.raw.dtype.type(scale)
    if check_isfinite:
        return total
    from .. import nd

    return nd.array([total], ctx=arrays[0].context)
