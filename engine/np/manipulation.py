"""``mx.np``'s array manipulation: flipping, rolling, stacking, splitting, inserting,
diagonals, padding and index helpers, differentiable where numpy's are linear.

>>> from engine import np
>>> np.roll(np.array([1.0, 2.0, 3.0]), 1).asnumpy().tolist()
[3.0, 1.0, 2.0]
>>> [p.shape for p in np.array_split(np.ones(5), 3)]
[(2,), (2,), (1,)]
"""

from __future__ import annotations

from typing import Any

import numpy

from .. import ndarray as _nd
from ..ndarray.ndarray import NDArray, numpy_shapes, write_out
from ._wrap import as_array, numpy_values, pieces, rearranging

flip = rearranging(numpy.flip)
fliplr = rearranging(numpy.fliplr)
flipud = rearranging(numpy.flipud)
roll = rearranging(numpy.roll)
rot90 = rearranging(numpy.rot90)
ravel = rearranging(numpy.ravel)
diagonal = rearranging(numpy.diagonal)
diagflat = rearranging(numpy.diagflat)
tril = rearranging(numpy.tril)
resize = rearranging(numpy.resize)
delete = rearranging(numpy.delete)
moveaxis = rearranging(numpy.moveaxis)
swapaxes = rearranging(numpy.swapaxes)
array_split = pieces(numpy.array_split)
hsplit = pieces(numpy.hsplit)
vsplit = pieces(numpy.vsplit)
dsplit = pieces(numpy.dsplit)


def diag(v: Any, k: int = 0) -> NDArray:
    """The ``k``-th diagonal of a matrix, or a matrix with vector ``v`` on it."""
    return rearranging(numpy.diag)(v, k)


def pad(x: Any, pad_width: Any, mode: str = "constant", **kwargs: Any) -> NDArray:
    """numpy's ``pad``; differentiable for the modes that copy elements (all but 'linear_ramp',
    'maximum', 'mean', 'median', 'minimum', whose filled values are not elements) and for
    'constant' with any fill value."""
    value = kwargs.pop("constant_values", 0)
    if mode == "constant" and value != 0:
        zero_padded = rearranging(numpy.pad)(x, pad_width, mode="constant")
        mask = numpy.pad(numpy.zeros(as_array(x).shape), pad_width, constant_values=1)
        return zero_padded + as_array(mask * value, zero_padded).astype(zero_padded.dtype)
    return rearranging(numpy.pad)(x, pad_width, mode=mode, **kwargs)


def take(a: Any, indices: Any, axis: int | None = None, mode: str = "raise",
         out: NDArray | None = None) -> NDArray:
    """Elements of ``a`` at ``indices`` (along ``axis``; the flattened array when None)."""
    idx = numpy.asarray(indices.asnumpy() if isinstance(indices, NDArray) else indices)
    result = rearranging(lambda x: numpy.take(x, idx, axis=axis, mode=mode))(a)
    return write_out(result, out)


def _at_least(ndim: int, arr: NDArray) -> NDArray:
    shape = arr.shape
    if arr.ndim >= ndim:
        return arr
    if ndim == 1 or arr.ndim == 0:
        new = (1,) * (ndim - max(arr.ndim, 1)) + (shape or (1,))
        if ndim == 3 and arr.ndim == 0:
            new = (1, 1, 1)
    elif ndim == 2:
        new = (1, *shape)
    else:  # numpy's 3-d view of a vector or matrix: (1, n, 1) / (m, n, 1)
        new = (1, shape[0], 1) if arr.ndim == 1 else (*shape, 1)
    return arr.reshape(new)


def _at_least_fn(ndim: int) -> Any:
    def op(*arys: Any) -> Any:
        out = [_at_least(ndim, as_array(a)) for a in arys]
        return out[0] if len(out) == 1 else out

    op.__name__ = f"atleast_{ndim}d"
    return op


atleast_1d, atleast_2d, atleast_3d = _at_least_fn(1), _at_least_fn(2), _at_least_fn(3)


def _joined(arrays: Any, axis: int, ndim: int) -> NDArray:
    parts = [_at_least(ndim, as_array(a)) for a in arrays]
    with numpy_shapes():
        return _nd.concat(*parts, dim=axis)


def hstack(arrays: Any) -> NDArray:
    first = as_array(arrays[0])
    return _joined(arrays, 0 if first.ndim <= 1 else 1, 1)


def vstack(arrays: Any) -> NDArray:
    return _joined(arrays, 0, 2)


row_stack = vstack


def dstack(arrays: Any) -> NDArray:
    return _joined(arrays, 2, 3)


def column_stack(tup: Any) -> NDArray:
    cols = [as_array(a) for a in tup]
    cols = [c.reshape((c.shape[0], 1)) if c.ndim == 1 else c for c in cols]
    with numpy_shapes():
        return _nd.concat(*cols, dim=1)


def append(arr: Any, values: Any, axis: int | None = None) -> NDArray:
    a, v = as_array(arr), as_array(values, arr if isinstance(arr, NDArray) else None)
    if axis is None:
        a, v = a.reshape((-1,)), v.reshape((-1,))
        axis = 0
    with numpy_shapes():
        return _nd.concat(a, v.astype(a.dtype), dim=axis)


def insert(arr: Any, obj: Any, values: Any, axis: int | None = None) -> NDArray:
    """``values`` inserted before index/indices ``obj`` (gradients to ``arr`` and
    ``values``)."""
    a = as_array(arr)
    flat = a.reshape((-1,)) if axis is None else a
    ax = 0 if axis is None else axis
    n = flat.shape[ax]
    positions = numpy.insert(numpy.arange(n), obj, -1)  # -1 marks an inserted slot
    kept = numpy.nonzero(positions >= 0)[0]
    v = as_array(values, a).astype(a.dtype)
    target = list(flat.shape)
    target[ax] = len(positions) - n
    v = v.broadcast_to(tuple(target)) if v.shape != tuple(target) else v
    # the output is the concatenation [kept elements, inserted ones] put in order
    with numpy_shapes():
        joined = _nd.concat(flat, v, dim=ax)
    order = numpy.empty(len(positions), numpy.int64)
    order[kept] = numpy.arange(n)
    order[positions < 0] = numpy.arange(n, len(positions))
    return take(joined, order, axis=ax)


def broadcast_arrays(*args: Any) -> list[NDArray]:
    arrays = [as_array(a) for a in args]
    shape = numpy.broadcast_shapes(*(a.shape for a in arrays))
    return [a.broadcast_to(shape) if a.shape != shape else a for a in arrays]


def meshgrid(*xi: Any, indexing: str = "xy", sparse: bool = False, copy: bool = True) -> list:
    """Coordinate matrices from coordinate vectors (differentiable)."""
    vectors = [as_array(x).reshape((-1,)) for x in xi]
    n = len(vectors)
    out = []
    for i, v in enumerate(vectors):
        shape = [1] * n
        shape[i] = v.shape[0]
        if indexing == "xy" and n > 1 and i < 2:
            shape[0], shape[1] = shape[1], shape[0]
        out.append(v.reshape(tuple(shape)))
    if sparse:
        return out
    return broadcast_arrays(*out)


indices = numpy_values(numpy.indices)
unravel_index = numpy_values(numpy.unravel_index)
diag_indices_from = numpy_values(numpy.diag_indices_from)
nonzero = numpy_values(numpy.nonzero)


def shape(a: Any) -> tuple[int, ...]:
    return tuple(a.shape) if isinstance(a, NDArray) else numpy.shape(a)


def may_share_memory(a: Any, b: Any, max_work: Any = None) -> bool:
    return bool(numpy.may_share_memory(_raw_of(a), _raw_of(b)))


def shares_memory(a: Any, b: Any, max_work: Any = None) -> bool:
    return bool(numpy.shares_memory(_raw_of(a), _raw_of(b)))


def _raw_of(x: Any) -> Any:
    return x.raw if isinstance(x, NDArray) else x


__all__ = [
    "append", "array_split", "atleast_1d", "atleast_2d", "atleast_3d", "broadcast_arrays",
    "column_stack", "delete", "diag", "diag_indices_from", "diagflat", "diagonal", "dsplit",
    "dstack", "flip", "fliplr", "flipud", "hsplit", "hstack", "indices", "insert",
    "may_share_memory", "meshgrid", "moveaxis", "nonzero", "pad", "ravel", "resize", "roll",
    "rot90", "row_stack", "shape", "shares_memory", "swapaxes", "take", "tril",
    "unravel_index", "vsplit", "vstack",
]
