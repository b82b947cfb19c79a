"""Slicing and layout operators of MXNet's ``nd``: ``slice``, ``slice_axis``, ``slice_like``,
``reshape_like``, ``flip``, ``crop``/``Crop``, ``depth_to_space``, ``diag``, ``pad``,
``moveaxis``, ``concatenate``, ``split_v2`` and the ``broadcast_*`` family.

All are differentiable: they are built from indexing, ``reshape`` and ``transpose``.

>>> from engine import nd
>>> x = nd.arange(12).reshape((3, 4))
>>> nd.slice(x, begin=(0, 1), end=(2, 3)).asnumpy().tolist()
[[1.0, 2.0], [5.0, 6.0]]
>>> nd.slice_axis(x, axis=1, begin=-1, end=None).shape
(3, 1)
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy

from ..base import MXNetShapeError
from .ndarray import NDArray, apply_op
from .shape_ops import concat, getitem, reshape, split, squeeze, transpose

_pyslice = builtins.slice  # this module defines its own ``slice`` (MXNet's operator name)


def _opt(v: Any) -> Any:
    return None if v is None or (isinstance(v, str) and v == "None") else int(v)


def slice(data: NDArray, begin: Sequence[Any], end: Sequence[Any],  # noqa: A001
          step: Sequence[Any] = (), **_: Any) -> NDArray:
    """``data[begin[i]:end[i]:step[i]]`` on the leading axes (None keeps the whole axis)."""
    begin, end = tuple(begin), tuple(end)
    if len(begin) != len(end):
        raise MXNetShapeError(f"slice: begin {begin} and end {end} differ in length")
    steps = tuple(step) + (None,) * (len(begin) - len(tuple(step)))
    key = tuple(
        _pyslice(_opt(b), _opt(e), _opt(s)) for b, e, s in zip(begin, end, steps, strict=True)
    )
    return getitem(data, key, view=False)


def slice_axis(data: NDArray, axis: int, begin: int, end: int | None, **_: Any) -> NDArray:
    """``data[..., begin:end, ...]`` on one axis."""
    key = [_pyslice(None)] * data.ndim
    key[axis] = _pyslice(_opt(begin), _opt(end))
    return getitem(data, tuple(key), view=False)


def slice_like(data: NDArray, shape_like: NDArray, axes: Sequence[int] = (), **_: Any):
    """``data`` cut to ``shape_like``'s size on ``axes`` (all axes when empty)."""
    chosen = [a % data.ndim for a in axes] if axes else range(min(data.ndim, shape_like.ndim))
    key = [_pyslice(None)] * data.ndim
    for a in chosen:
        if shape_like.shape[a] > data.shape[a]:
            raise MXNetShapeError(
                f"slice_like: axis {a} of size {shape_like.shape[a]} exceeds {data.shape[a]}"
            )
        key[a] = _pyslice(0, shape_like.shape[a])
    return getitem(data, tuple(key), view=False)


def reshape_like(lhs: NDArray, rhs: NDArray, lhs_begin: int | None = None,
                 lhs_end: int | None = None, rhs_begin: int | None = None,
                 rhs_end: int | None = None, **_: Any) -> NDArray:
    """``lhs`` reshaped to ``rhs``'s shape (or splice ``rhs``'s axes into part of it)."""
    lb, le = _opt(lhs_begin) or 0, lhs.ndim if lhs_end is None else _opt(lhs_end) % (lhs.ndim + 1)
    rb, re = _opt(rhs_begin) or 0, rhs.ndim if rhs_end is None else _opt(rhs_end) % (rhs.ndim + 1)
    target = lhs.shape[:lb] + rhs.shape[rb:re] + lhs.shape[le:]
    return reshape(lhs, target)


def flip(data: NDArray, axis: Any, **_: Any) -> NDArray:
    """Reverse the order of elements along ``axis`` (MXNet's ``reverse``)."""
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    key = [_pyslice(None)] * data.ndim
    for a in axes:
        key[a] = _pyslice(None, None, -1)
    return getitem(data, tuple(key), view=False)


def crop(*data: NDArray, num_args: int = 1, offset: Sequence[int] = (0, 0),
         h_w: Sequence[int] = (0, 0), center_crop: bool = False, **_: Any) -> NDArray:
    """MXNet's legacy ``Crop`` on NCHW data: to ``h_w`` or to the second input's size."""
    x = data[0]
    if num_args > 1 or len(data) > 1:
        h, w = data[1].shape[2], data[1].shape[3]
    else:
        h, w = h_w
    top, left = offset
    if center_crop:
        top, left = (x.shape[2] - h) // 2, (x.shape[3] - w) // 2
    if top + h > x.shape[2] or left + w > x.shape[3]:
        raise MXNetShapeError(f"Crop: {h}x{w} at {(top, left)} exceeds input {x.shape}")
    return getitem(x, (_pyslice(None), _pyslice(None), _pyslice(top, top + h),
                       _pyslice(left, left + w)), view=False)


def depth_to_space(data: NDArray, block_size: int, **_: Any) -> NDArray:
    """Move channel blocks into spatial blocks: (N, C·b², H, W) -> (N, C, H·b, W·b)."""
    n, c, h, w = data.shape
    b = block_size
    if c % (b * b):
        raise MXNetShapeError(f"depth_to_space: channels {c} not divisible by {b * b}")
    x = reshape(data, (n, b, b, c // (b * b), h, w))
    return reshape(transpose(x, (0, 3, 4, 1, 5, 2)), (n, c // (b * b), h * b, w * b))


def space_to_depth(data: NDArray, block_size: int, **_: Any) -> NDArray:
    """Inverse of :func:`depth_to_space`: (N, C, H·b, W·b) -> (N, C·b², H, W)."""
    n, c, h, w = data.shape
    b = block_size
    if h % b or w % b:
        raise MXNetShapeError(f"space_to_depth: {h}x{w} not divisible by block {b}")
    x = reshape(data, (n, c, h // b, b, w // b, b))
    return reshape(transpose(x, (0, 3, 5, 1, 2, 4)), (n, c * b * b, h // b, w // b))


def diag(data: NDArray, k: int = 0, axis1: int = 0, axis2: int = 1, **_: Any) -> NDArray:
    """A diagonal matrix from a vector, or the ``k``-th diagonal of an array."""
    xp = data.xp
    x = data._data
    if data.ndim == 1:
        out = xp.diag(x, k)
        return apply_op(out, (data,), lambda g: (xp.diagonal(g, k).copy(),))
    out = xp.diagonal(x, k, axis1, axis2).copy()
    shape = data.shape

    def backward(g: Any) -> tuple[Any]:
        full = xp.zeros(shape, dtype=g.dtype)
        moved = xp.moveaxis(full, (axis1, axis2), (-2, -1))
        rows = xp.arange(g.shape[-1]) + max(-k, 0)
        moved[..., rows, rows + k] = g
        return (full,)

    return apply_op(out, (data,), backward)


def pad(data: NDArray, mode: str = "constant", pad_width: Sequence[int] = (),
        constant_value: float = 0.0, **_: Any) -> NDArray:
    """Pad a 4-D or 5-D array with ``pad_width`` = (before0, after0, before1, after1, ...);
    as in MXNet, the batch and channel axes cannot be padded. ``mode``: constant, edge or
    reflect."""
    widths = tuple(int(p) for p in pad_width)
    if data.ndim not in (4, 5) or len(widths) != 2 * data.ndim:
        raise MXNetShapeError(f"pad: pad_width must have 2 values per axis of a 4-D or 5-D "
                              f"array, got {widths} for shape {data.shape}")
    if any(widths[:4]):
        raise MXNetShapeError("pad: the batch and channel axes cannot be padded")
    pairs = [(widths[2 * i], widths[2 * i + 1]) for i in range(data.ndim)]
    xp = data.xp
    if mode == "constant":
        out = xp.pad(data._data, pairs, mode="constant", constant_values=constant_value)
    elif mode in ("edge", "reflect"):
        out = xp.pad(data._data, pairs, mode=mode)
    else:
        raise ValueError(f"pad: mode must be constant, edge or reflect, got {mode!r}")
    shape = data.shape
    if mode == "constant":
        inner = tuple(_pyslice(b, b + n) for (b, _), n in zip(pairs, shape, strict=True))
        return apply_op(out, (data,), lambda g: (g[inner],))
    return apply_op(out, (data,), lambda g: (_pad_grad(xp, g, pairs, shape, mode),))


def _pad_grad(xp: Any, g: Any, pairs: list[tuple[int, int]], shape: tuple[int, ...],
              mode: str) -> Any:
    """Fold the gradient of padded cells back onto the cells they copied."""
    index = numpy.pad(numpy.arange(int(numpy.prod(shape))).reshape(shape), pairs, mode=mode)
    out = xp.zeros(int(numpy.prod(shape)), dtype=g.dtype)
    xp.add.at(out, xp.asarray(index.reshape(-1)), g.reshape(-1))
    return out.reshape(shape)


def _axes_in_range(axes: Any, ndim: int, what: str) -> list[int]:
    """Axes as non-negative ints; one outside ``[-ndim, ndim)`` is a ValueError (MXNet)."""
    out = []
    for a in (axes,) if isinstance(axes, int) else axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"moveaxis: {what} axis {a} is out of range for {ndim} dimensions")
        out.append(a % ndim)
    return out


def moveaxis(tensor: NDArray, source: Any, destination: Any, **_: Any) -> NDArray:
    """Move axes to new positions, keeping the order of the others."""
    src = _axes_in_range(source, tensor.ndim, "source")
    dst = _axes_in_range(destination, tensor.ndim, "destination")
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: {len(src)} source axes but {len(dst)} destinations")
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"moveaxis: repeated axis in source {source} or destination "
                         f"{destination}")
    order = [a for a in range(tensor.ndim) if a not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return transpose(tensor, tuple(order))


def concatenate(arrays: Sequence[NDArray], axis: int = 0, always_copy: bool = True) -> NDArray:
    """Join a list of arrays along ``axis`` (axis 0 by default, unlike ``concat``)."""
    if not always_copy and len(arrays) == 1:
        return arrays[0]
    return concat(*arrays, dim=axis)


def split_v2(ary: NDArray, indices_or_sections: Any, axis: int = 0,
             squeeze_axis: bool = False) -> Any:
    """numpy-style split: a section count, or the indices to cut at."""
    if isinstance(indices_or_sections, int):
        return split(ary, indices_or_sections, axis=axis, squeeze_axis=squeeze_axis)
    cuts = [0, *indices_or_sections, ary.shape[axis]]
    parts = []
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        key = [_pyslice(None)] * ary.ndim
        key[axis] = _pyslice(lo, hi)
        part = getitem(ary, tuple(key), view=False)
        parts.append(squeeze(part, axis) if squeeze_axis and hi - lo == 1 else part)
    return parts


def broadcast_axes(data: NDArray, axis: Any = (), size: Any = (), **_: Any) -> NDArray:
    """Broadcast the size-1 ``axis`` (one or several) to ``size``."""
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    sizes = (size,) if isinstance(size, int) else tuple(size)
    target = list(data.shape)
    for a, n in zip(axes, sizes, strict=True):
        if data.shape[a] != 1:
            raise MXNetShapeError(f"broadcast_axis: axis {a} has size {data.shape[a]}, not 1")
        target[a] = n
    return data.broadcast_to(tuple(target))


def broadcast_like(lhs: NDArray, rhs: NDArray, lhs_axes: Any = None, rhs_axes: Any = None,
                   **_: Any) -> NDArray:
    """``lhs`` broadcast to ``rhs``'s shape, or only ``lhs_axes`` to ``rhs``'s ``rhs_axes``."""
    if lhs_axes is None and rhs_axes is None:
        return lhs.broadcast_to(rhs.shape)
    la = (lhs_axes,) if isinstance(lhs_axes, int) else tuple(lhs_axes)
    ra = (rhs_axes,) if isinstance(rhs_axes, int) else tuple(rhs_axes)
    if not la or not ra:
        raise MXNetShapeError("broadcast_like: an empty axes tuple is not allowed")
    if len(la) != len(ra):
        raise MXNetShapeError(f"broadcast_like: lhs_axes {la} and rhs_axes {ra} differ")
    target = list(lhs.shape)
    for a, b in zip(la, ra, strict=True):
        target[a] = rhs.shape[b]
    return lhs.broadcast_to(tuple(target))
