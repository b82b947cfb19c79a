"""Per-sample normalizations and padding: ``InstanceNorm``, ``GroupNorm``, ``pad`` (MXNet names).

They are compositions of differentiable primitives (mean, square, rsqrt, take), so autograd
differentiates them without rules of their own. Variances are biased (divide by the count),
as MXNet's kernels compute them.

>>> from engine import nd
>>> x = nd.array([[[1.0, 3.0]]])
>>> nd.InstanceNorm(x, nd.ones((1,)), nd.zeros((1,)), eps=0.0).asnumpy().tolist()
[[[-1.0, 1.0]]]
>>> nd.pad(nd.array([[[[1.0, 2.0, 3.0]]]]), mode="reflect",
...        pad_width=(0, 0, 0, 0, 0, 0, 1, 1)).asnumpy().tolist()
[[[[2.0, 1.0, 2.0, 3.0, 2.0]]]]
"""

from __future__ import annotations

from typing import Any

import numpy

from .ndarray import NDArray, apply_op
from .shape_ops import take


def _normalize(x: NDArray, axes: tuple[int, ...], eps: float) -> NDArray:
    mean = x.mean(axis=axes, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=axes, keepdims=True)
    return centered * (var + eps).rsqrt()


def instance_norm(data: NDArray, gamma: NDArray, beta: NDArray, eps: float = 1e-3,
                  **_: Any) -> NDArray:
    """Normalize each (sample, channel) over the spatial axes 2.., then ``* gamma + beta``
    per channel (axis 1)."""
    if data.ndim < 3:
        raise ValueError(f"InstanceNorm needs data of at least 3 dims, got shape {data.shape}")
    normed = _normalize(data, tuple(range(2, data.ndim)), eps)
    cshape = (1, -1) + (1,) * (data.ndim - 2)
    return normed * gamma.reshape(cshape) + beta.reshape(cshape)


def group_norm(data: NDArray, gamma: NDArray, beta: NDArray, num_groups: int = 1,
               eps: float = 1e-5, output_mean_var: bool = False, **_: Any) -> NDArray:
    """Split the channels (axis 1) into ``num_groups`` groups, normalize each sample's group
    over its channels and spatial axes, then scale/shift per group (MXNet 1.9's gamma and
    beta have ``num_groups`` values)."""
    n, c = data.shape[0], data.shape[1]
    if c % num_groups:
        raise ValueError(f"GroupNorm: {c} channels are not divisible by {num_groups} groups")
    grouped = data.reshape((n, num_groups, c // num_groups) + data.shape[2:])
    normed = _normalize(grouped, tuple(range(2, grouped.ndim)), eps)
    gshape = (1, num_groups) + (1,) * (grouped.ndim - 2)
    out = normed * gamma.reshape(gshape) + beta.reshape(gshape)
    return out.reshape(data.shape)


def _source_index(size: int, before: int, after: int, mode: str) -> numpy.ndarray:
    positions = numpy.arange(-before, size + after)
    if mode == "edge":
        return numpy.clip(positions, 0, size - 1)
    if before >= size or after >= size:
        raise ValueError(f"reflect padding ({before}, {after}) must be smaller than the "
                         f"axis length {size}")
    period = 2 * (size - 1)
    folded = numpy.abs(positions) % period if period else numpy.zeros_like(positions)
    return numpy.where(folded >= size, period - folded, folded)


def pad(data: NDArray, mode: str = "constant", pad_width: Any = (), constant_value: float = 0.0,
        **_: Any) -> NDArray:
    """Pad a 4-D or 5-D array; ``pad_width`` has (before, after) per axis, and the first two
    axes must not be padded (MXNet's ``Pad`` rule). ``mode``: constant, edge or reflect."""
    width = tuple(int(w) for w in pad_width)
    if data.ndim not in (4, 5) or len(width) != 2 * data.ndim:
        raise ValueError(f"pad: pad_width must have 2 values per axis of a 4-D or 5-D array, "
                         f"got {width} for shape {data.shape}")
    if any(width[:4]):
        raise ValueError("pad: the batch and channel axes cannot be padded")
    pairs = [(width[2 * i], width[2 * i + 1]) for i in range(data.ndim)]
    if mode == "constant":
        xp = data.xp
        out = xp.pad(data._data, pairs, mode="constant", constant_values=constant_value)
        crop = tuple(slice(b, b + s) for (b, _a), s in zip(pairs, data.shape, strict=True))
        return apply_op(out, (data,), lambda g: (g[crop],))
    if mode not in ("edge", "reflect"):
        raise ValueError(f"pad: mode must be constant, edge or reflect, got {mode!r}")
    out = data
    for axis, (before, after) in enumerate(pairs):
        if before or after:
            index = data.xp.asarray(_source_index(data.shape[axis], before, after, mode))
            out = take(out, index, axis=axis)
    return out


InstanceNorm = instance_norm
GroupNorm = group_norm
Pad = pad
