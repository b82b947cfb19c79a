"""Per-sample normalizations: ``InstanceNorm`` and ``GroupNorm`` (MXNet names).

They are compositions of differentiable primitives (mean, square, rsqrt), so autograd
differentiates them without rules of their own. Variances are biased (divide by the count),
as MXNet's kernels compute them.

>>> from engine import nd
>>> x = nd.array([[[1.0, 3.0]]])
>>> nd.InstanceNorm(x, nd.ones((1,)), nd.zeros((1,)), eps=0.0).asnumpy().tolist()
[[[-1.0, 1.0]]]
"""

from __future__ import annotations

from typing import Any

from .ndarray import NDArray


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


InstanceNorm = instance_norm
GroupNorm = group_norm
