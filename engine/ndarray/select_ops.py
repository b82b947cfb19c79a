"""Selection, ordering and gathering operators of MXNet's ``nd``: ``sort``, ``argsort``,
``topk``, ``gather_nd``/``scatter_nd``, ``batch_take``, ``choose_element_0index``,
``fill_element_0index``, ``ravel_multi_index``, the ``Sequence*`` ops, ``add_n`` and
``reset_arrays``.

Index outputs are float32 by default, as MXNet returns them.

>>> from engine import nd
>>> nd.topk(nd.array([[3, 1, 2]]), k=2).asnumpy().tolist()
[[0.0, 2.0]]
>>> nd.sort(nd.array([3, 1, 2]), is_ascend=False).asnumpy().tolist()
[3.0, 2.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy

from ..base import MXNetError, MXNetShapeError
from .ndarray import NDArray, apply_op, as_raw
from .shape_ops import getitem, pick


def _order(data: NDArray, axis: int | None, is_ascend: bool) -> tuple[Any, Any, int]:
    """The data (flattened when axis is None), its sort order and the axis used."""
    x = data._data.reshape(-1) if axis is None else data._data
    ax = 0 if axis is None else axis % data.ndim
    xp = data.xp
    # stable on the negated keys so equal values keep index order in both directions
    idx = xp.argsort(x if is_ascend else -x, axis=ax, kind="stable")
    return x, idx, ax


def _gather_sorted(data: NDArray, x: Any, idx: Any, ax: int) -> NDArray:
    xp = data.xp
    out = xp.take_along_axis(x, idx, axis=ax)
    shape = x.shape
    orig = data.shape

    def backward(g: Any) -> tuple[Any]:
        full = xp.zeros(shape, dtype=g.dtype)
        xp.put_along_axis(full, idx, g, axis=ax)
        return (full.reshape(orig),)

    return apply_op(out, (data,), backward)


def sort(data: NDArray, axis: int | None = -1, is_ascend: bool = True, **_: Any) -> NDArray:
    """Values sorted along ``axis`` (flattened when None)."""
    x, idx, ax = _order(data, axis, is_ascend)
    return _gather_sorted(data, x, idx, ax)


def argsort(data: NDArray, axis: int | None = -1, is_ascend: bool = True,
            dtype: Any = "float32", **_: Any) -> NDArray:
    """Indices that sort ``data`` along ``axis``."""
    _, idx, _ = _order(data, axis, is_ascend)
    return NDArray(idx.astype(numpy.dtype(dtype)), data.context)


def topk(data: NDArray, axis: int | None = -1, k: int = 1, ret_typ: str = "indices",
         is_ascend: bool = False, dtype: Any = "float32", **_: Any) -> Any:
    """The ``k`` largest (or smallest) entries along ``axis``: their indices, values, a 0/1
    mask, or ``[values, indices]`` for ``ret_typ='both'``."""
    x, idx, ax = _order(data, axis, is_ascend)
    n = x.shape[ax]
    k = n if k <= 0 else min(k, n)
    xp = data.xp
    top = xp.take(idx, xp.arange(k), axis=ax)
    if ret_typ == "indices":
        return NDArray(top.astype(numpy.dtype(dtype)), data.context)
    if ret_typ == "mask":
        mask = xp.zeros(x.shape, dtype=x.dtype)
        xp.put_along_axis(mask, top, 1, axis=ax)
        return NDArray(mask.reshape(data.shape), data.context)
    values = _gather_sorted(data, x, top, ax)
    if ret_typ == "value":
        return values
    if ret_typ == "both":
        return [values, NDArray(top.astype(numpy.dtype(dtype)), data.context)]
    raise ValueError(f"topk: ret_typ must be value, indices, mask or both, got {ret_typ!r}")


def argmax_channel(data: NDArray, **_: Any) -> NDArray:
    """Index of the largest entry along axis 1, the channel axis, in the input's dtype.

    >>> from engine import nd
    >>> nd.argmax_channel(nd.array([[1, 5, 2], [7, 0, 1]])).asnumpy().tolist()
    [1.0, 0.0]
    """
    return NDArray(data._data.argmax(axis=1).astype(data._data.dtype), data.context)


def gather_nd(data: NDArray, indices: NDArray, **_: Any) -> NDArray:
    """``out[y] = data[indices[0, y], ..., indices[M-1, y]]``."""
    idx = tuple(as_raw(indices).astype(numpy.int64))
    xp = data.xp
    x = data._data
    out = x[idx]

    def backward(g: Any) -> tuple[Any]:
        full = xp.zeros_like(x)
        xp.add.at(full, idx, g)
        return (full,)

    return apply_op(out, (data,), backward)


def scatter_nd(data: NDArray, indices: NDArray, shape: Sequence[int], **_: Any) -> NDArray:
    """An array of ``shape`` with ``data`` written at ``indices`` (the inverse of gather_nd)."""
    idx = tuple(as_raw(indices).astype(numpy.int64))
    xp = data.xp
    out = xp.zeros(tuple(shape), dtype=data._data.dtype)
    out[idx] = data._data
    return apply_op(out, (data,), lambda g: (g[idx],))


def batch_take(a: NDArray, indices: NDArray, **_: Any) -> NDArray:
    """``a[i, indices[i]]`` for every row ``i``."""
    return pick(a, indices, axis=-1)


def choose_element_0index(lhs: NDArray, rhs: NDArray, **_: Any) -> NDArray:
    """``lhs[i, rhs[i]]`` for every row ``i``."""
    return pick(lhs, rhs, axis=-1)


def fill_element_0index(lhs: NDArray, mhs: NDArray, rhs: NDArray, **_: Any) -> NDArray:
    """A copy of ``lhs`` with ``lhs[i, rhs[i]] = mhs[i]``."""
    xp = lhs.xp
    out = lhs._data.copy()
    rows = xp.arange(out.shape[0])
    cols = as_raw(rhs).astype(numpy.int64)
    out[rows, cols] = as_raw(mhs)
    return NDArray(out, lhs.context)


def ravel_multi_index(data: NDArray, shape: Sequence[int], **_: Any) -> NDArray:
    """Flat indices of the coordinates in ``data`` (one row per axis) into ``shape``."""
    coords = as_raw(data).astype(numpy.int64)
    strides = numpy.cumprod((tuple(shape)[1:] + (1,))[::-1])[::-1].copy()
    xp = data.xp
    flat = (coords * xp.asarray(strides).reshape((-1,) + (1,) * (coords.ndim - 1))).sum(axis=0)
    return NDArray(flat.astype(data._data.dtype), data.context)


def unravel_index(data: NDArray, shape: Sequence[int], **_: Any) -> NDArray:
    """Coordinates (one row per axis of ``shape``) of the flat indices in ``data``."""
    xp = data.xp
    flat = as_raw(data).astype(numpy.int64)
    coords = xp.stack(xp.unravel_index(flat, tuple(shape)))
    return NDArray(coords.astype(data._data.dtype), data.context)


def onehot_encode(indices: NDArray, out: NDArray) -> NDArray:
    """Write the one-hot rows of ``indices`` into ``out`` (its width is the depth)."""
    xp = out.xp
    rows = xp.zeros(out.shape, dtype=out._data.dtype)
    rows[xp.arange(out.shape[0]), as_raw(indices).astype(numpy.int64)] = 1
    out._data[...] = rows
    return out


def histogram(data: NDArray, bins: Any = 10, range: Any = None, **_: Any) -> list[NDArray]:  # noqa: A002
    """``[counts, bin_edges]`` as numpy's histogram computes them."""
    edges_in = bins.asnumpy() if isinstance(bins, NDArray) else int(bins)
    counts, edges = numpy.histogram(data.asnumpy(), bins=edges_in, range=range)
    xp = data.xp
    return [NDArray(xp.asarray(counts.astype(numpy.int64)), data.context),
            NDArray(xp.asarray(edges.astype(data._data.dtype)), data.context)]


def khatri_rao(*args: NDArray) -> NDArray:
    """Column-wise Kronecker product of matrices with the same number of columns."""
    result = args[0]
    for m in args[1:]:
        r = result.expand_dims(1) * m.expand_dims(0)
        result = r.reshape((-1, m.shape[1]))
    return result


def add_n(*args: Any, **_: Any) -> NDArray:
    """The elementwise sum of all arguments (MXNet's ``ElementWiseSum``)."""
    arrays = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else args
    if not arrays:
        raise MXNetError("add_n needs at least one array")
    total = arrays[0]
    for a in arrays[1:]:
        total = total + a
    return total if len(arrays) > 1 else total * 1


def reset_arrays(*data: NDArray, num_arrays: int | None = None, **_: Any) -> None:
    """Set every array to zero, in place."""
    for arr in data:
        arr._data[...] = 0


def shape_array(data: NDArray, **_: Any) -> NDArray:
    return NDArray(data.xp.asarray(data.shape, dtype=numpy.int64), data.context)


def size_array(data: NDArray, **_: Any) -> NDArray:
    return NDArray(data.xp.asarray([data.size], dtype=numpy.int64), data.context)


# ------------------------------------------------------- variable-length sequences


def _lengths(data: NDArray, sequence_length: Any, use: bool, axis: int) -> Any:
    n = data.shape[axis]
    batch = data.shape[1 - axis]
    if not use or sequence_length is None:
        return numpy.full(batch, n, dtype=numpy.int64)
    return sequence_length.asnumpy().astype(numpy.int64)


def sequence_mask(data: NDArray, sequence_length: Any = None,
                  use_sequence_length: bool = False, value: float = 0.0, axis: int = 0,
                  **_: Any) -> NDArray:
    """Replace steps past each sequence's length with ``value`` (time on ``axis`` 0 or 1)."""
    lengths = _lengths(data, sequence_length, use_sequence_length, axis)
    steps = numpy.arange(data.shape[axis])
    keep = steps[:, None] < lengths[None, :]  # (time, batch)
    if axis == 1:
        keep = keep.T
    keep = keep.reshape(keep.shape + (1,) * (data.ndim - 2))
    xp = data.xp
    mask = xp.asarray(keep)
    out = xp.where(mask, data._data, value).astype(data._data.dtype)
    return apply_op(out, (data,), lambda g: (g * mask,))


def sequence_last(data: NDArray, sequence_length: Any = None,
                  use_sequence_length: bool = False, axis: int = 0, **_: Any) -> NDArray:
    """Each sequence's last valid step."""
    lengths = _lengths(data, sequence_length, use_sequence_length, axis)
    batch = numpy.arange(len(lengths))
    key = (lengths - 1, batch) if axis == 0 else (batch, lengths - 1)
    return getitem(data, tuple(NDArray(data.xp.asarray(k), data.context) for k in key))


def sequence_reverse(data: NDArray, sequence_length: Any = None,
                     use_sequence_length: bool = False, axis: int = 0, **_: Any) -> NDArray:
    """Reverse each sequence's valid steps along axis 0, leaving padding in place."""
    if axis != 0:
        raise MXNetShapeError("SequenceReverse supports axis=0 only, as MXNet")
    lengths = _lengths(data, sequence_length, use_sequence_length, axis)
    t = data.shape[0]
    steps = numpy.arange(t)[:, None]
    src = numpy.where(steps < lengths[None, :], lengths[None, :] - 1 - steps, steps)
    batch = numpy.broadcast_to(numpy.arange(len(lengths))[None, :], src.shape)
    xp = data.xp
    return getitem(data, (NDArray(xp.asarray(src), data.context),
                          NDArray(xp.asarray(batch.copy()), data.context)))
