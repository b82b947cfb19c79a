"""``gluon.contrib.nn``: ``Concurrent``, ``HybridConcurrent``, ``Identity``,
``PixelShuffle1D/2D/3D`` and ``SyncBatchNorm`` (plain BatchNorm: Rudder trains on one device
per job, where MXNet's cross-device statistics equal the device's own).

>>> import engine as mx
>>> from engine.gluon.contrib import nn as cnn
>>> cnn.PixelShuffle2D(2)(mx.nd.arange(8).reshape((1, 4, 1, 2))).shape
(1, 1, 2, 4)
"""

from __future__ import annotations

from typing import Any

from .... import ndarray as nd
from ...block import HybridBlock
from ...nn.basic_layers import BatchNorm, HybridSequential, Sequential


class Concurrent(Sequential):
    """Runs every child on the same input and concatenates their outputs along ``axis``."""

    def __init__(self, axis: int = -1, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix=prefix, params=params)
        self.axis = axis

    def forward(self, x: Any) -> Any:  # type: ignore[override]
        return nd.concat(*[block(x) for block in self._children.values()], dim=self.axis)


class HybridConcurrent(HybridSequential):
    """``Concurrent`` for HybridBlocks; hybridizes and runs on Symbols (DenseNet and
    SqueezeNet in the model zoo are built from it)."""

    def __init__(self, axis: int = -1, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix=prefix, params=params)
        self.axis = axis

    # HybridSequential.forward chains its children; here every branch reads the same input,
    # so HybridBlock.forward comes back: it hands hybrid_forward the F of the call (nd,
    # symbol, or the hybridize tracer), and concat is then recorded like any other op.
    forward = HybridBlock.forward

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return F.concat(*[block(x) for block in self._children.values()], dim=self.axis)


class Identity(HybridBlock):
    """Returns its input (a placeholder branch, e.g. inside ``HybridConcurrent``)."""

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return x


class SyncBatchNorm(BatchNorm):
    """BatchNorm over axis 1 with MXNet's SyncBatchNorm signature; ``num_devices`` is
    accepted and statistics are those of the single device a Rudder job trains on."""

    def __init__(self, in_channels: int = 0, num_devices: int | None = None,
                 momentum: float = 0.9, epsilon: float = 1e-5, center: bool = True,
                 scale: bool = True, use_global_stats: bool = False,
                 beta_initializer: Any = "zeros", gamma_initializer: Any = "ones",
                 running_mean_initializer: Any = "zeros",
                 running_variance_initializer: Any = "ones", **kwargs: Any) -> None:
        super().__init__(axis=1, momentum=momentum, epsilon=epsilon, center=center,
                         scale=scale, use_global_stats=use_global_stats,
                         beta_initializer=beta_initializer,
                         gamma_initializer=gamma_initializer,
                         running_mean_initializer=running_mean_initializer,
                         running_variance_initializer=running_variance_initializer,
                         in_channels=in_channels, **kwargs)
        self._num_devices = num_devices or 1


def _factors(factor: Any, count: int) -> tuple[int, ...]:
    if isinstance(factor, int):
        return (factor,) * count
    factors = tuple(int(f) for f in factor)
    if len(factors) != count:
        raise ValueError(f"wrong length {len(factors)} of factor, expected {count}")
    return factors


class _PixelShuffle(HybridBlock):
    """Moves channel groups into the spatial axes: (N, C·∏f, *S) -> (N, C, *(s·f))."""

    _dims = 1

    def __init__(self, factor: Any) -> None:
        super().__init__()
        self._factors = _factors(factor, self._dims)

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        n, channels, *spatial = x.shape
        factors = self._factors
        groups = 1
        for f in factors:
            groups *= f
        if channels % groups:
            raise ValueError(f"{type(self).__name__}: {channels} channels are not divisible "
                             f"by {groups}")
        d = self._dims
        x = x.reshape((n, channels // groups, *factors, *spatial))
        # interleave: (N, C, s1, f1, s2, f2, ...)
        order = [0, 1] + [axis for i in range(d) for axis in (2 + d + i, 2 + i)]
        x = x.transpose(tuple(order))
        return x.reshape((n, channels // groups,
                          *(s * f for s, f in zip(spatial, factors, strict=True))))

    def __repr__(self) -> str:
        shown = self._factors[0] if self._dims == 1 else self._factors
        return f"{type(self).__name__}({shown})"


class PixelShuffle1D(_PixelShuffle):
    """(N, C·f, W) -> (N, C, W·f)."""

    _dims = 1


class PixelShuffle2D(_PixelShuffle):
    """(N, C·f1·f2, H, W) -> (N, C, H·f1, W·f2); ``factor`` an int or a pair."""

    _dims = 2


class PixelShuffle3D(_PixelShuffle):
    """(N, C·f1·f2·f3, D, H, W) -> (N, C, D·f1, H·f2, W·f3)."""

    _dims = 3


__all__ = ["Concurrent", "HybridConcurrent", "Identity", "PixelShuffle1D", "PixelShuffle2D",
           "PixelShuffle3D", "SyncBatchNorm"]
