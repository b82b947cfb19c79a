"""Convolution and pooling layers: ``Conv2D``, ``MaxPool2D``, ``AvgPool2D``,
``GlobalAvgPool2D``, ``GlobalMaxPool2D`` (NCHW) and their 1-D forms (NCW).

>>> import engine as mx
>>> net = mx.gluon.nn.HybridSequential()
>>> net.add(mx.gluon.nn.Conv2D(4, 3, padding=1, activation="relu"), mx.gluon.nn.MaxPool2D())
>>> net.initialize(); net(mx.nd.ones((2, 1, 8, 8))).shape
(2, 4, 4, 4)
"""

from __future__ import annotations

from typing import Any

from ..block import HybridBlock
from .activations import Activation
from .registry import register

_LAYOUTS = {1: "NCW", 2: "NCHW"}


def _tuple(value: Any, ndim: int) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,) * ndim
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        return value * ndim
    if len(value) != ndim:
        raise ValueError(f"expected {ndim} value(s), got {value}")
    return value


def _check_layout(layout: str, ndim: int) -> None:
    if layout != _LAYOUTS[ndim]:
        raise ValueError(f"only layout {_LAYOUTS[ndim]!r} is supported, got {layout!r}")


class _Conv(HybridBlock):
    """N-d convolution; ``weight`` is (channels, in_channels/groups, *kernel) and
    ``in_channels`` is inferred at the first forward when 0."""

    _ndim = 2

    def __init__(self, channels: int, kernel_size: Any, strides: Any, padding: Any,
                 dilation: Any, groups: int, layout: str, activation: str | None,
                 use_bias: bool, weight_initializer: Any, bias_initializer: Any,
                 in_channels: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        nd_ = self._ndim
        _check_layout(layout, nd_)
        if in_channels and in_channels % groups:
            raise ValueError(f"in_channels={in_channels} is not divisible by groups={groups}")
        if channels % groups:
            raise ValueError(f"channels={channels} is not divisible by groups={groups}")
        self._channels = channels
        self._in_channels = in_channels
        self._kwargs = {"kernel": _tuple(kernel_size, nd_), "stride": _tuple(strides, nd_),
                        "dilate": _tuple(dilation, nd_), "pad": _tuple(padding, nd_),
                        "num_filter": channels, "num_group": groups}
        kernel = self._kwargs["kernel"]
        with self.name_scope():
            self.weight = self.params.get(
                "weight", shape=(channels, in_channels // groups, *kernel),  # type: ignore[misc]
                init=weight_initializer, allow_deferred_init=True)
            if use_bias:
                self.bias = self.params.get("bias", shape=(channels,), init=bias_initializer,
                                            allow_deferred_init=True)
            else:
                self.bias = None
            self.act = Activation(activation, prefix=activation + "_") if activation else None

    def _alias(self) -> str:
        return "conv"

    def infer_shape(self, x: Any, *args: Any) -> None:
        if x.ndim != self._ndim + 2:
            raise ValueError(f"{self.name}: {type(self).__name__} expects "
                             f"{_LAYOUTS[self._ndim]} input, got shape {x.shape}")
        groups = self._kwargs["num_group"]
        if x.shape[1] % groups:  # type: ignore[operator]
            raise ValueError(
                f"{self.name}: input has {x.shape[1]} channels, not divisible by groups={groups}"
            )
        shape = self.weight.shape
        assert shape is not None
        self.weight.shape = (shape[0], x.shape[1] // groups, *shape[2:])  # type: ignore[operator]

    def hybrid_forward(self, F: Any, x: Any, weight: Any, bias: Any = None) -> Any:  # noqa: N803
        try:
            out = F.Convolution(x, weight, bias, no_bias=bias is None, **self._kwargs)
        except ValueError as err:
            raise ValueError(f"{self.name} ({type(self).__name__}): {err}") from err
        return self.act(out) if self.act is not None else out

    def __repr__(self) -> str:
        shape = self.weight.shape or (0, 0)
        k = self._kwargs
        return (f"{type(self).__name__}({shape[1] * k['num_group'] or None} -> "  # type: ignore[operator]
                f"{self._channels}, "
                f"kernel_size={k['kernel']}, stride={k['stride']}, padding={k['pad']})")


@register
class Conv2D(_Conv):
    """2-D convolution over NCHW input."""

    def __init__(self, channels: int, kernel_size: Any, strides: Any = (1, 1),
                 padding: Any = (0, 0), dilation: Any = (1, 1), groups: int = 1,
                 layout: str = "NCHW", activation: str | None = None, use_bias: bool = True,
                 weight_initializer: Any = None, bias_initializer: Any = "zeros",
                 in_channels: int = 0, **kwargs: Any) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         activation, use_bias, weight_initializer, bias_initializer,
                         in_channels, **kwargs)


@register
class Conv1D(_Conv):
    """1-D convolution over NCW input (sequences)."""

    _ndim = 1

    def __init__(self, channels: int, kernel_size: Any, strides: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, layout: str = "NCW",
                 activation: str | None = None, use_bias: bool = True,
                 weight_initializer: Any = None, bias_initializer: Any = "zeros",
                 in_channels: int = 0, **kwargs: Any) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         activation, use_bias, weight_initializer, bias_initializer,
                         in_channels, **kwargs)


class _Pool2D(HybridBlock):
    _ndim = 2

    def __init__(self, pool_size: Any, strides: Any, padding: Any, ceil_mode: bool,
                 global_pool: bool, pool_type: str, layout: str,
                 count_include_pad: bool | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _check_layout(layout, self._ndim)
        if strides is None:
            strides = pool_size
        nd_ = self._ndim
        self._kwargs: dict[str, Any] = {
            "kernel": _tuple(pool_size, nd_), "stride": _tuple(strides, nd_),
            "pad": _tuple(padding, nd_),
            "global_pool": global_pool, "pool_type": pool_type,
            "pooling_convention": "full" if ceil_mode else "valid"}
        if count_include_pad is not None:
            self._kwargs["count_include_pad"] = count_include_pad

    def _alias(self) -> str:
        return "pool"

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return F.Pooling(x, **self._kwargs)

    def __repr__(self) -> str:
        k = self._kwargs
        return (f"{type(self).__name__}(size={k['kernel']}, stride={k['stride']}, "
                f"padding={k['pad']}, ceil_mode={k['pooling_convention'] == 'full'}, "
                f"global_pool={k['global_pool']}, pool_type={k['pool_type']}, "
                f"layout={_LAYOUTS[self._ndim]})")


@register
class MaxPool2D(_Pool2D):
    """Max pooling; ``strides`` defaults to ``pool_size``."""

    def __init__(self, pool_size: Any = (2, 2), strides: Any = None, padding: Any = 0,
                 layout: str = "NCHW", ceil_mode: bool = False, **kwargs: Any) -> None:
        super().__init__(pool_size, strides, padding, ceil_mode, False, "max", layout, **kwargs)


@register
class AvgPool2D(_Pool2D):
    """Average pooling; padding counts in the average unless ``count_include_pad=False``."""

    def __init__(self, pool_size: Any = (2, 2), strides: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, layout: str = "NCHW", count_include_pad: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(pool_size, strides, padding, ceil_mode, False, "avg", layout,
                         count_include_pad, **kwargs)


@register
class GlobalMaxPool2D(_Pool2D):
    """Max over each whole channel plane: (N, C, H, W) → (N, C, 1, 1)."""

    def __init__(self, layout: str = "NCHW", **kwargs: Any) -> None:
        super().__init__(1, None, 0, True, True, "max", layout, **kwargs)


@register
class GlobalAvgPool2D(_Pool2D):
    """Mean over each whole channel plane: (N, C, H, W) → (N, C, 1, 1)."""

    def __init__(self, layout: str = "NCHW", **kwargs: Any) -> None:
        super().__init__(1, None, 0, True, True, "avg", layout, **kwargs)


class _Pool1D(_Pool2D):
    _ndim = 1


@register
class MaxPool1D(_Pool1D):
    """Max pooling over NCW input; ``strides`` defaults to ``pool_size``."""

    def __init__(self, pool_size: Any = 2, strides: Any = None, padding: Any = 0,
                 layout: str = "NCW", ceil_mode: bool = False, **kwargs: Any) -> None:
        super().__init__(pool_size, strides, padding, ceil_mode, False, "max", layout, **kwargs)


@register
class AvgPool1D(_Pool1D):
    """Average pooling over NCW input."""

    def __init__(self, pool_size: Any = 2, strides: Any = None, padding: Any = 0,
                 layout: str = "NCW", ceil_mode: bool = False, count_include_pad: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(pool_size, strides, padding, ceil_mode, False, "avg", layout,
                         count_include_pad, **kwargs)


@register
class GlobalMaxPool1D(_Pool1D):
    """Max over each whole channel: (N, C, W) → (N, C, 1)."""

    def __init__(self, layout: str = "NCW", **kwargs: Any) -> None:
        super().__init__(1, None, 0, True, True, "max", layout, **kwargs)


@register
class GlobalAvgPool1D(_Pool1D):
    """Mean over each whole channel: (N, C, W) → (N, C, 1)."""

    def __init__(self, layout: str = "NCW", **kwargs: Any) -> None:
        super().__init__(1, None, 0, True, True, "avg", layout, **kwargs)
