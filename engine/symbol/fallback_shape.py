"""Shape, indexing, ordering, sequence and random operators of ``mx.sym`` that
``engine.nd`` lacks, as private NDArray helpers with MXNet's signatures. Most are written
with differentiable NDArray indexing and reshapes, so autograd gives their gradients.

>>> from engine import nd
>>> SHAPE['slice_axis'](nd.arange(6).reshape((2, 3)), axis=1, begin=1, end=None).shape
(2, 2)
"""

from __future__ import annotations

from typing import Any

import numpy

from ..backend import array_module
from ..ndarray import NDArray, apply_op
from ..ndarray.ndarray import as_raw
from ..ndarray.shape_ops import getitem


def _bound(value: Any) -> Any:
    return None if value is None or value == "None" else int(value)


def slice_op(data: NDArray, begin: Any, end: Any, step: Any = ()) -> NDArray:
    """MXNet's ``slice``: per-axis ``begin``/``end``/``step`` (None keeps the default)."""
    steps = tuple(step) if step else (None,) * len(begin)
    key = tuple(slice(_bound(b), _bound(e), _bound(s))
                for b, e, s in zip(begin, end, steps, strict=False))
    return getitem(data, key)


def slice_axis(data: NDArray, axis: int, begin: int, end: Any) -> NDArray:
    key = [slice(None)] * data.ndim
    key[axis] = slice(begin, _bound(end))
    return getitem(data, tuple(key))


def slice_like(data: NDArray, shape_like: NDArray, axes: Any = ()) -> NDArray:
    axes = tuple(a % data.ndim for a in axes) if axes else tuple(range(shape_like.ndim))
    key = tuple(slice(0, shape_like.shape[i]) if i in axes else slice(None)
                for i in range(data.ndim))
    return getitem(data, key)


def reshape_like(lhs: NDArray, rhs: NDArray) -> NDArray:
    return lhs.reshape(rhs.shape)


def flip(data: NDArray, axis: Any) -> NDArray:
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    key = [slice(None)] * data.ndim
    for a in axes:
        key[a % data.ndim] = slice(None, None, -1)
    return getitem(data, tuple(key))


def broadcast_axis(data: NDArray, axis: Any = (), size: Any = ()) -> NDArray:
    from ..ndarray.shape_ops import broadcast_to

    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    sizes = (size,) if isinstance(size, int) else tuple(size)
    shape = list(data.shape)
    for a, s in zip(axes, sizes, strict=True):
        shape[a % data.ndim] = s
    return broadcast_to(data, tuple(shape))


def cast(data: NDArray, dtype: Any) -> NDArray:
    return data.astype(dtype)


def shape_array(data: NDArray) -> NDArray:
    return NDArray(data.xp.asarray(data.shape, dtype=numpy.int64), data._ctx)


def size_array(data: NDArray) -> NDArray:
    return NDArray(data.xp.asarray([data.size], dtype=numpy.int64), data._ctx)


def diag(data: NDArray, k: int = 0, axis1: int = 0, axis2: int = 1) -> NDArray:
    x = data.raw
    xp = data.xp
    if x.ndim == 1:
        out = xp.diag(x, k)
        return apply_op(out, (data,), lambda g: (xp.diagonal(g, k).copy(),))
    out = xp.diagonal(x, k, axis1, axis2).copy()

    def backward(g: Any) -> tuple[Any]:
        moved = xp.zeros(tuple(n for i, n in enumerate(x.shape) if i not in (axis1, axis2))
                         + (x.shape[axis1], x.shape[axis2]), dtype=g.dtype)
        idx = xp.arange(g.shape[-1])
        rows, cols = (idx, idx + k) if k >= 0 else (idx - k, idx)
        moved[..., rows, cols] = g
        return (xp.moveaxis(moved, (-2, -1), (axis1, axis2)),)

    return apply_op(out, (data,), backward)


def depth_to_space(data: NDArray, block_size: int) -> NDArray:
    n, c, h, w = data.shape
    b = block_size
    x = data.reshape((n, b, b, c // (b * b), h, w)).transpose(0, 3, 4, 1, 5, 2)
    return x.reshape((n, c // (b * b), h * b, w * b))


def space_to_depth(data: NDArray, block_size: int) -> NDArray:
    n, c, h, w = data.shape
    b = block_size
    x = data.reshape((n, c, h // b, b, w // b, b)).transpose(0, 3, 5, 1, 2, 4)
    return x.reshape((n, c * b * b, h // b, w // b))


def pad(data: NDArray, mode: str = "constant", pad_width: Any = (),
        constant_value: float = 0.0) -> NDArray:
    """MXNet's ``Pad``: ``pad_width`` is (before, after) for every axis, flattened."""
    x = data.raw
    xp = data.xp
    widths = [(int(pad_width[2 * i]), int(pad_width[2 * i + 1])) for i in range(x.ndim)]
    if mode == "constant":
        out = xp.pad(x, widths, mode="constant", constant_values=constant_value)
    else:
        out = xp.pad(x, widths, mode={"edge": "edge", "reflect": "reflect"}[mode])
    inner = tuple(slice(lo, lo + n) for (lo, _), n in zip(widths, x.shape, strict=True))
    if mode == "constant":
        return apply_op(out, (data,), lambda g: (g[inner].copy(),))

    def backward(g: Any) -> tuple[Any]:  # edge/reflect copies: scatter-add through indices
        index = xp.arange(x.size).reshape(x.shape)
        padded = xp.pad(index, widths, mode={"edge": "edge", "reflect": "reflect"}[mode])
        full = xp.zeros(x.size, dtype=g.dtype)
        xp.add.at(full, padded.ravel(), g.ravel())
        return (full.reshape(x.shape),)

    return apply_op(out, (data,), backward)


def _sequence_mask(data: NDArray, sequence_length: Any, axis: int) -> Any:
    xp = data.xp
    lengths = as_raw(sequence_length).astype(numpy.int64)
    steps = xp.arange(data.shape[axis])
    mask = steps[:, None] < lengths[None, :]  # (time, batch)
    if axis == 1:
        mask = mask.T
    return mask.reshape(mask.shape + (1,) * (data.ndim - 2))


def sequence_mask(data: NDArray, sequence_length: Any = None,
                  use_sequence_length: bool = False, value: float = 0.0,
                  axis: int = 0) -> NDArray:
    if not use_sequence_length:
        return data + 0
    mask = _sequence_mask(data, sequence_length, axis)
    x = data.raw
    out = data.xp.where(mask, x, value).astype(x.dtype)
    return apply_op(out, (data,), lambda g: (g * mask,))


def sequence_last(data: NDArray, sequence_length: Any = None,
                  use_sequence_length: bool = False, axis: int = 0) -> NDArray:
    from ..ndarray.ops import reduce_sum

    if not use_sequence_length:
        return slice_axis(data, axis, data.shape[axis] - 1, None).squeeze(axis)
    lengths = as_raw(sequence_length).astype(numpy.int64)
    steps = data.xp.arange(data.shape[axis])
    pick = (steps[:, None] == lengths[None, :] - 1)
    if axis == 1:
        pick = pick.T
    pick = pick.reshape(pick.shape + (1,) * (data.ndim - 2)).astype(data.dtype)
    return reduce_sum(data * NDArray(pick, data._ctx), axis=axis)


def sequence_reverse(data: NDArray, sequence_length: Any = None,
                     use_sequence_length: bool = False, axis: int = 0) -> NDArray:
    if not use_sequence_length:
        return flip(data, 0)
    lengths = as_raw(sequence_length).astype(numpy.int64)
    xp = data.xp
    t = data.shape[0]
    steps = xp.arange(t)[:, None]
    source = xp.where(steps < lengths[None, :], lengths[None, :] - 1 - steps, steps)
    batch = xp.arange(data.shape[1])[None, :]
    return getitem(data, (source, xp.broadcast_to(batch, source.shape)))


def _sorted_indices(x: Any, axis: int, is_ascend: bool) -> Any:
    xp = array_module(x)
    return xp.argsort(x if is_ascend else -x, axis=axis, kind="stable")


def _gather(data: NDArray, order: Any, axis: int) -> NDArray:
    """``data`` at ``order`` along ``axis``, differentiable (the gradient scatters back)."""
    xp = data.xp
    x = data.raw

    def backward(g: Any) -> tuple[Any]:
        full = xp.zeros_like(x)
        xp.put_along_axis(full, order, g, axis=axis)
        return (full,)

    return apply_op(xp.take_along_axis(x, order, axis=axis), (data,), backward)


def sort(data: NDArray, axis: int = -1, is_ascend: bool = True) -> NDArray:
    return _gather(data, _sorted_indices(data.raw, axis, is_ascend), axis)


def argsort(data: NDArray, axis: int = -1, is_ascend: bool = True,
            dtype: Any = "float32") -> NDArray:
    order = _sorted_indices(data.raw, axis, is_ascend)
    return NDArray(order.astype(numpy.dtype(dtype)), data._ctx)


def topk(data: NDArray, axis: int = -1, k: int = 1, ret_typ: str = "indices",
         is_ascend: bool = False, dtype: Any = "float32") -> Any:
    x = data.raw
    xp = data.xp
    order = xp.take(_sorted_indices(x, axis, is_ascend), xp.arange(k), axis=axis)
    indices = NDArray(order.astype(numpy.dtype(dtype)), data._ctx)
    if ret_typ == "value":
        return _gather(data, order, axis)
    if ret_typ == "both":
        return [_gather(data, order, axis), indices]
    if ret_typ == "mask":
        mask = xp.zeros_like(x)
        xp.put_along_axis(mask, order, 1, axis=axis)
        return NDArray(mask, data._ctx)
    return indices


def cumsum(a: NDArray, axis: Any = None, dtype: Any = None) -> NDArray:
    x = a.raw
    xp = a.xp
    flat = axis is None
    src = x.ravel() if flat else x
    ax = 0 if flat else axis
    out = xp.cumsum(src, axis=ax).astype(dtype or x.dtype)

    def backward(g: Any) -> tuple[Any]:
        rev = xp.flip(xp.cumsum(xp.flip(g, ax), axis=ax), ax)
        return (rev.reshape(x.shape),)

    return apply_op(out, (a,), backward)


def khatri_rao(*args: NDArray) -> NDArray:
    """Column-wise Kronecker product of matrices with the same number of columns."""
    out = args[0]
    for mat in args[1:]:
        rows = out.shape[0] * mat.shape[0]
        out = (out.expand_dims(1) * mat.expand_dims(0)).reshape((rows, -1))
    return out


def upsampling(*data: NDArray, scale: int = 1, sample_type: str = "nearest",
               num_filter: int = 0, multi_input_mode: str = "concat",
               num_args: int = 1, workspace: int = 512) -> NDArray:
    """Nearest-neighbour ``UpSampling`` (the bilinear mode needs a learned weight)."""
    from ..ndarray.shape_ops import concat, repeat

    if sample_type != "nearest":
        raise NotImplementedError("UpSampling supports sample_type='nearest' only")
    outs = []
    for arr in data:
        factor = scale * data[0].shape[2] // arr.shape[2]
        outs.append(repeat(repeat(arr, factor, axis=2), factor, axis=3))
    if len(outs) == 1:
        return outs[0]
    if multi_input_mode == "sum":
        total = outs[0]
        for arr in outs[1:]:
            total = total + arr
        return total
    return concat(*outs, dim=1)


def _random(kind: str) -> Any:
    def draw(*args: Any, shape: Any = (), dtype: Any = "float32", ctx: Any = None,
             **params: Any) -> NDArray:
        from ..ndarray import random

        fn = getattr(random, kind)
        return fn(*args, shape=shape or (1,), dtype=None if dtype in ("None", None) else dtype,
                  **params)

    draw.__name__ = f"random_{kind}"
    return draw


SHAPE: dict[str, Any] = {
    "slice": slice_op, "crop": slice_op, "slice_axis": slice_axis, "slice_like": slice_like,
    "reshape_like": reshape_like, "flip": flip, "reverse": flip,
    "broadcast_axis": broadcast_axis, "broadcast_axes": broadcast_axis, "cast": cast,
    "Cast": cast, "shape_array": shape_array, "size_array": size_array, "diag": diag,
    "depth_to_space": depth_to_space, "space_to_depth": space_to_depth, "pad": pad,
    "Pad": pad, "SequenceMask": sequence_mask, "SequenceLast": sequence_last,
    "SequenceReverse": sequence_reverse, "sort": sort, "argsort": argsort, "topk": topk,
    "cumsum": cumsum, "khatri_rao": khatri_rao, "UpSampling": upsampling,
    "random_uniform": _random("uniform"), "uniform": _random("uniform"),
    "random_normal": _random("normal"), "normal": _random("normal"),
    "random_exponential": _random("exponential"), "random_gamma": _random("gamma"),
    "random_poisson": _random("poisson"), "random_randint": _random("randint"),
}
