"""Shape, layout and indexing operations (differentiable): reshape, transpose, concat,
slicing, ``take`` and ``pick``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy

from ..util import is_np_shape
from .ndarray import NDArray, apply_op, as_raw, unbroadcast


def _mxnet_shape(src: tuple[int, ...], shape: Sequence[int], reverse: bool = False):
    """Resolve MXNet's reshape codes: 0 copies a dimension, -1 infers one, -2 copies all
    remaining ones, -3 merges two, -4 splits one into the next two values (one may be -1).
    ``reverse`` reads both shapes from the right."""
    if reverse:
        return tuple(reversed(_mxnet_shape(src[::-1], _reverse_codes(shape))))
    out: list[int] = []
    i = j = 0
    codes = [int(s) for s in shape]
    while j < len(codes):
        code = codes[j]
        if code == -2:
            out.extend(src[i:])
            i = len(src)
        elif code == -3:
            if i + 1 >= len(src):
                raise ValueError(f"reshape: code -3 at position {j} needs two source dimensions")
            out.append(src[i] * src[i + 1])
            i += 2
        elif code == -4:
            if j + 2 >= len(codes) or i >= len(src):
                raise ValueError("reshape: code -4 must be followed by two dimensions")
            d1, d2 = codes[j + 1], codes[j + 2]
            if d1 == -1:
                d1 = src[i] // d2
            if d2 == -1:
                d2 = src[i] // d1
            if d1 * d2 != src[i]:
                raise ValueError(f"reshape: -4 split {d1}x{d2} does not match dimension {src[i]}")
            out += [d1, d2]
            i += 1
            j += 2
        elif code == 0:
            if i >= len(src):
                raise ValueError(f"reshape: code 0 at position {j} has no source dimension")
            out.append(src[i])
            i += 1
        elif code < -4:
            raise ValueError(f"reshape: unknown shape code {code}")
        else:
            out.append(code)
            i += 1
        j += 1
    return tuple(out)


def _reverse_codes(shape: Sequence[int]) -> list[int]:
    """Shape codes read right to left; a -4 keeps its two following values in order."""
    codes = [int(s) for s in shape]
    groups: list[list[int]] = []
    j = 0
    while j < len(codes):
        if codes[j] == -4:
            groups.append([-4, codes[j + 2], codes[j + 1]])
            j += 3
        else:
            groups.append([codes[j]])
            j += 1
    return [c for group in reversed(groups) for c in group]


def reshape(x: NDArray, *shape: Any, **kwargs: Any) -> NDArray:
    """``nd.reshape(x, shape)``: a new array of the given shape (MXNet's Reshape operator
    copies; the method ``x.reshape(shape)`` is the view, see :func:`reshape_view`)."""
    return _reshape(x, shape, kwargs, view=False)


def reshape_view(x: NDArray, *shape: Any, **kwargs: Any) -> NDArray:
    """``x.reshape(shape)``: the same buffer under a new shape, as MXNet's method is."""
    return _reshape(x, shape, kwargs, view=True)


def _reshape(x: NDArray, shape: Any, kwargs: dict[str, Any], view: bool) -> NDArray:
    if "shape" in kwargs:
        shape = kwargs.pop("shape")
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    reverse = bool(kwargs.pop("reverse", False))
    kwargs.pop("inplace", None)  # MXNet's hint for its executor's memory planning
    kwargs.pop("target_shape", None)
    kwargs.pop("keep_highest", None)
    if kwargs:
        raise TypeError(f"reshape got unexpected arguments {sorted(kwargs)}")
    target = _mxnet_shape(x.shape, shape, reverse)
    src = x.shape
    try:
        out = x._data.reshape(target)
    except ValueError as err:
        raise ValueError(f"cannot reshape array of shape {src} into {tuple(shape)}") from err
    # an explicit reshape to () is MXNet's one legacy way to ask for a 0-d array
    result = apply_op(out, (x,), lambda g: (g.reshape(src),), keep_0d=not target, view=view)
    if result._node is not None:
        result._node.op = ("reshape",)
    return result


def transpose(x: NDArray, *axes: Any, **kwargs: Any) -> NDArray:
    if "axes" in kwargs:  # MXNet's keyword form: transpose(x, axes=(1, 0, 2))
        axes = (kwargs.pop("axes"),)
    if kwargs:
        raise TypeError(f"transpose got unexpected arguments {sorted(kwargs)}")
    if len(axes) == 1 and axes[0] is None:
        axes = ()
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    perm = tuple(axes) if axes else tuple(reversed(range(x.ndim)))
    inverse = tuple(numpy.argsort(perm))
    return apply_op(x._data.transpose(perm), (x,), lambda g: (g.transpose(inverse),))


# The operators (nd.expand_dims, nd.squeeze, nd.flatten) make new arrays; the NDArray methods
# of the same names take ``inplace=True`` for a view of the same buffer, as MXNet's do.


def expand_dims(x: NDArray, axis: int) -> NDArray:
    """A new array with a length-1 axis inserted at ``axis``."""
    return expand_dims_method(x, axis)


def expand_dims_method(x: NDArray, axis: int, inplace: bool = False) -> NDArray:
    src = x.shape
    return apply_op(x.xp.expand_dims(x._data, axis), (x,), lambda g: (g.reshape(src),),
                    view=inplace)


def squeeze(x: NDArray, axis: Any = None) -> NDArray:
    """A new array without the length-1 axes (those of ``axis`` only, when given)."""
    return squeeze_method(x, axis)


def squeeze_method(x: NDArray, axis: Any = None, inplace: bool = False) -> NDArray:
    src = x.shape
    return apply_op(x.xp.squeeze(x._data, axis=axis), (x,), lambda g: (g.reshape(src),),
                    view=inplace)


def flatten(x: NDArray) -> NDArray:
    """Collapse all axes but the first (MXNet's ``Flatten``) into a new array."""
    return flatten_method(x)


def flatten_method(x: NDArray, inplace: bool = False) -> NDArray:
    shape = (x.shape[0], -1) if x.ndim else (1, 1)
    return _reshape(x, (shape,), {}, view=inplace)


def broadcast_to(x: NDArray, shape: Sequence[int]) -> NDArray:
    target = tuple(x.shape[i] if s == 0 else s for i, s in enumerate(shape))
    src = x.shape
    out = x.xp.broadcast_to(x._data, target)
    return apply_op(out, (x,), lambda g: (unbroadcast(g, src),))


def tile(x: NDArray, reps: Sequence[int]) -> NDArray:
    reps = tuple(reps)
    src = x.shape
    out = x.xp.tile(x._data, reps)

    def backward(g: Any) -> tuple[Any]:
        full = (1,) * (g.ndim - len(src)) + src
        r = (1,) * (g.ndim - len(reps)) + reps
        split = []
        for n, k in zip(full, r, strict=True):
            split += [k, n]
        return (g.reshape(split).sum(axis=tuple(range(0, 2 * g.ndim, 2))).reshape(src),)

    return apply_op(out, (x,), backward)


def repeat(x: NDArray, repeats: int, axis: int | None = None) -> NDArray:
    src = x.shape
    out = x.xp.repeat(x._data, repeats, axis=axis)

    def backward(g: Any) -> tuple[Any]:
        if axis is None:
            return (g.reshape(-1, repeats).sum(axis=1).reshape(src),)
        ax = axis % len(src)
        shaped = g.reshape(src[:ax] + (src[ax], repeats) + src[ax + 1 :])
        return (shaped.sum(axis=ax + 1),)

    return apply_op(out, (x,), backward)


def _array_list(arrays: tuple[Any, ...]) -> list[NDArray]:
    if len(arrays) == 1 and isinstance(arrays[0], (list, tuple)):
        return list(arrays[0])
    return list(arrays)


def concat(*arrays: Any, dim: int = 1, axis: int | None = None) -> NDArray:
    """Join arrays along an axis: ``concat(a, b, dim=1)`` (MXNet) or ``concat([a, b], axis=1)``."""
    arrays = _array_list(arrays)
    axis = dim if axis is None else axis
    if not arrays:
        raise ValueError("concat needs at least one array")
    xp = arrays[0].xp
    out = xp.concatenate([a._data for a in arrays], axis=axis)
    bounds = numpy.cumsum([a.shape[axis] for a in arrays])[:-1]
    return apply_op(out, tuple(arrays), lambda g: xp.split(g, bounds, axis=axis))


def stack(*arrays: Any, axis: int = 0) -> NDArray:
    """Stack arrays along a new axis: ``stack(a, b)`` (MXNet) or ``stack([a, b])``."""
    arrays = _array_list(arrays)
    if not arrays:
        raise ValueError("stack needs at least one array")
    xp = arrays[0].xp
    out = xp.stack([a._data for a in arrays], axis=axis)
    n = len(arrays)
    return apply_op(
        out, tuple(arrays),
        lambda g: [xp.take(g, i, axis=axis) for i in range(n)],
    )


def split(x: NDArray, num_outputs: int, axis: int = 1, squeeze_axis: bool = False):
    if x.shape[axis] % num_outputs:
        raise ValueError(
            f"split: axis {axis} of length {x.shape[axis]} is not divisible by {num_outputs}"
        )
    step = x.shape[axis] // num_outputs
    outs = []
    for i in range(num_outputs):
        index = [slice(None)] * x.ndim
        index[axis] = slice(i * step, (i + 1) * step)
        part = getitem(x, tuple(index), view=False)  # MXNet's split makes new arrays
        outs.append(squeeze(part, axis) if squeeze_axis and step == 1 else part)
    return outs


def swapaxes(x: NDArray, dim1: int, dim2: int) -> NDArray:
    perm = list(range(x.ndim))
    perm[dim1], perm[dim2] = perm[dim2], perm[dim1]
    return transpose(x, tuple(perm))


# -------------------------------------------------------------------- indexing


def raw_index(key: Any) -> Any:
    if isinstance(key, NDArray):  # a boolean array is a mask, anything else indices
        return key._data if key._data.dtype == bool else key._data.astype(numpy.int64)
    if isinstance(key, tuple):
        return tuple(raw_index(k) for k in key)
    return key


def _is_basic(key: Any) -> bool:
    keys = key if isinstance(key, tuple) else (key,)
    return all(
        isinstance(k, (int, numpy.integer, slice)) or k is None or k is Ellipsis for k in keys
    )


def _is_mask(key: Any) -> bool:
    return getattr(key, "dtype", None) == numpy.bool_


def _all_integers(key: Any, ndim: int) -> bool:
    keys = key if isinstance(key, tuple) else (key,)
    return len(keys) == ndim and all(isinstance(k, (int, numpy.integer)) for k in keys)


def getitem(x: NDArray, key: Any, view: bool = True) -> NDArray:
    """``x[key]``. Basic indexing (integers, slices, None, ...) whose elements are contiguous
    in memory gives a view that shares ``x``'s buffer, as MXNet's does (``x[i]``,
    ``x[i:j]``, ``x[i, :]``, a single element); any other key gives a new array."""
    key = raw_index(key)
    data = x._data
    xp = x.xp
    basic = _is_basic(key)
    if basic and _all_integers(key, x.ndim):
        # numpy hands out a detached scalar for a full integer index; one element more
        # (a new length-1 axis) keeps it a view, as MXNet's single-element index is
        key = (*(key if isinstance(key, tuple) else (key,)), None)
        out = data[key]
        if is_np_shape() or not x.ndim:
            out = out.reshape(())
    else:
        out = data[key]
        if not hasattr(out, "shape"):
            out = xp.asarray(out)
        if basic and not out.flags.c_contiguous:
            out = out.copy()  # MXNet copies what a flat range of the buffer cannot hold

    def backward(g: Any) -> tuple[Any]:
        full = xp.zeros_like(data)
        if basic:
            full[key] = g.reshape(full[key].shape)
        elif _is_mask(key):  # a mask picks each element at most once
            full[key] = g
        else:
            xp.add.at(full, key, g)
        return (full,)

    # legacy indexing down to one element gives shape (1,); numpy shape semantics give 0-d
    return apply_op(out, (x,), backward, keep_0d=is_np_shape(), view=view and basic)


def take(x: NDArray, indices: Any, axis: int = 0, mode: str = "clip") -> NDArray:
    idx = as_raw(indices).astype(numpy.int64)
    n = x.shape[axis]
    idx = x.xp.clip(idx, 0, n - 1) if mode == "clip" else idx % n
    data = x._data
    out = x.xp.take(data, idx, axis=axis)
    xp = x.xp

    def backward(g: Any) -> tuple[Any]:
        full = xp.zeros_like(data)
        moved = xp.moveaxis(full, axis, 0)
        gm = xp.moveaxis(g, tuple(range(axis, axis + idx.ndim)), tuple(range(idx.ndim)))
        xp.add.at(moved, idx, gm)
        return (full,)

    return apply_op(out, (x,), backward)


def pick(x: NDArray, index: Any, axis: int = -1, keepdims: bool = False) -> NDArray:
    """``x[..., index[...], ...]`` along ``axis``: one element per row (MXNet ``pick``)."""
    xp = x.xp
    ax = axis % x.ndim
    idx = as_raw(index, x).astype(numpy.int64)  # a cpu index for gpu data moves there
    idx = xp.clip(idx, 0, x.shape[ax] - 1)
    idx_exp = xp.expand_dims(idx.reshape(x.shape[:ax] + x.shape[ax + 1 :]), ax)
    data = x._data
    out = xp.take_along_axis(data, idx_exp, axis=ax)
    if not keepdims:
        out = out.squeeze(ax)

    def backward(g: Any) -> tuple[Any]:
        full = xp.zeros_like(data)
        gk = g if keepdims else xp.expand_dims(g, ax)
        xp.put_along_axis(full, idx_exp, gk, axis=ax)
        return (full,)

    return apply_op(out, (x,), backward)


