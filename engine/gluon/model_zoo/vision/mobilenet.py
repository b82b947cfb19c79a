"""MobileNet v1 (depthwise-separable convolutions) and MobileNet v2 (inverted residuals with
linear bottlenecks and ReLU6), each with a width ``multiplier`` (1.0, 0.75, 0.5, 0.25).

Same classes, arguments and parameter names as MXNet 1.9.1's ``gluon.model_zoo.vision``
(``mobilenet0_conv0_weight``, ``mobilenetv20_features_linearbottleneck0_conv0_weight``,
``mobilenetv20_output_pred_weight``). Both end in a global average pool, so any input of
at least 32×32 works.

>>> import engine as mx
>>> from engine.gluon.model_zoo import vision
>>> net = vision.mobilenet_v2_0_25(classes=10)
>>> net.initialize()
>>> net(mx.nd.ones((1, 3, 32, 32))).shape
(1, 10)
"""

from __future__ import annotations

from typing import Any

from ....context import Context
from ... import nn
from ...block import HybridBlock
from ..model_store import DEFAULT_ROOT, refuse_pretrained

__all__ = [
    "MobileNet", "MobileNetV2", "RELU6", "LinearBottleneck", "get_mobilenet",
    "get_mobilenet_v2", "mobilenet0_25", "mobilenet0_5", "mobilenet0_75", "mobilenet1_0",
    "mobilenet_v2_0_25", "mobilenet_v2_0_5", "mobilenet_v2_0_75", "mobilenet_v2_1_0",
]


class RELU6(HybridBlock):
    """``min(max(x, 0), 6)``: MobileNet v2's activation (MXNet computes it with clip)."""

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return F.clip(x, 0, 6)


def _add_conv(out: nn.HybridSequential, channels: int = 1, kernel: int = 1, stride: int = 1,
              pad: int = 0, num_group: int = 1, active: bool = True,
              relu6: bool = False) -> None:
    """Conv (no bias) + BatchNorm (+ ReLU or ReLU6) appended to ``out``."""
    out.add(nn.Conv2D(channels, kernel, stride, pad, groups=num_group, use_bias=False))
    out.add(nn.BatchNorm(scale=True))
    if active:
        out.add(RELU6() if relu6 else nn.Activation("relu"))


def _add_conv_dw(out: nn.HybridSequential, dw_channels: int, channels: int, stride: int,
                 relu6: bool = False) -> None:
    """A depthwise 3×3 convolution followed by a pointwise 1×1 one."""
    _add_conv(out, channels=dw_channels, kernel=3, stride=stride, pad=1,
              num_group=dw_channels, relu6=relu6)
    _add_conv(out, channels=channels, relu6=relu6)


class LinearBottleneck(HybridBlock):
    """Expand ×``t`` (1×1), depthwise 3×3 with ``stride``, project to ``channels`` (1×1,
    no activation); adds the input back when stride is 1 and the width is unchanged."""

    def __init__(self, in_channels: int, channels: int, t: int, stride: int,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.use_shortcut = stride == 1 and in_channels == channels
        expanded = in_channels * t
        with self.name_scope():
            self.out = nn.HybridSequential()
            _add_conv(self.out, expanded, relu6=True)
            _add_conv(self.out, expanded, kernel=3, stride=stride, pad=1, num_group=expanded,
                      relu6=True)
            _add_conv(self.out, channels, active=False, relu6=True)

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        out = self.out(x)
        return F.elemwise_add(out, x) if self.use_shortcut else out


def _scaled(widths: list[int], multiplier: float) -> list[int]:
    return [int(w * multiplier) for w in widths]


class MobileNet(HybridBlock):
    """MobileNet v1: a 3×3/2 stem and 13 depthwise-separable blocks, global average pool,
    Flatten, Dense(classes); every width scaled by ``multiplier``."""

    def __init__(self, multiplier: float = 1.0, classes: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        dw_channels = _scaled([32, 64] + [128] * 2 + [256] * 2 + [512] * 6 + [1024],
                              multiplier)
        channels = _scaled([64] + [128] * 2 + [256] * 2 + [512] * 6 + [1024] * 2, multiplier)
        strides = [1, 2] * 3 + [1] * 5 + [2, 1]
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            _add_conv(self.features, channels=int(32 * multiplier), kernel=3, pad=1, stride=2)
            for dw, width, stride in zip(dw_channels, channels, strides, strict=True):
                _add_conv_dw(self.features, dw_channels=dw, channels=width, stride=stride)
            self.features.add(nn.GlobalAvgPool2D(), nn.Flatten())
            self.output = nn.Dense(classes)

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return self.output(self.features(x))


class MobileNetV2(HybridBlock):
    """MobileNet v2: a 3×3/2 stem, 17 linear bottlenecks, a 1×1 conv to 1280 channels
    (scaled only when ``multiplier`` > 1), global average pool, and a 1×1 conv classifier
    (``output_pred_weight``, no bias) + Flatten."""

    def __init__(self, multiplier: float = 1.0, classes: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        in_widths = _scaled([32] + [16] + [24] * 2 + [32] * 3 + [64] * 4 + [96] * 3
                            + [160] * 3, multiplier)
        out_widths = _scaled([16] + [24] * 2 + [32] * 3 + [64] * 4 + [96] * 3 + [160] * 3
                             + [320], multiplier)
        expansions = [1] + [6] * 16
        strides = [1, 2] * 2 + [1, 1, 2] + [1] * 6 + [2] + [1] * 3
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="features_")
            with self.features.name_scope():
                _add_conv(self.features, int(32 * multiplier), kernel=3, stride=2, pad=1,
                          relu6=True)
                for in_c, c, t, s in zip(in_widths, out_widths, expansions, strides,
                                         strict=True):
                    self.features.add(LinearBottleneck(in_channels=in_c, channels=c, t=t,
                                                       stride=s))
                last_channels = int(1280 * multiplier) if multiplier > 1.0 else 1280
                _add_conv(self.features, last_channels, relu6=True)
                self.features.add(nn.GlobalAvgPool2D())
            self.output = nn.HybridSequential(prefix="output_")
            with self.output.name_scope():
                self.output.add(nn.Conv2D(classes, 1, use_bias=False, prefix="pred_"),
                                nn.Flatten())

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return self.output(self.features(x))


def _version_suffix(multiplier: float) -> str:
    """MXNet's file names: 1.0, 0.75, 0.5, 0.25."""
    suffix = f"{multiplier:.2f}"
    return suffix[:-1] if suffix in ("1.00", "0.50") else suffix


def get_mobilenet(multiplier: float, pretrained: bool = False, ctx: Context | None = None,
                  root: str = DEFAULT_ROOT, **kwargs: Any) -> MobileNet:
    """MobileNet v1 with width ``multiplier``; ``kwargs`` go to :class:`MobileNet`."""
    refuse_pretrained(pretrained, f"mobilenet{_version_suffix(multiplier)}", root)
    return MobileNet(multiplier, **kwargs)


def get_mobilenet_v2(multiplier: float, pretrained: bool = False,
                     ctx: Context | None = None, root: str = DEFAULT_ROOT,
                     **kwargs: Any) -> MobileNetV2:
    """MobileNet v2 with width ``multiplier``; ``kwargs`` go to :class:`MobileNetV2`."""
    refuse_pretrained(pretrained, f"mobilenetv2_{_version_suffix(multiplier)}", root)
    return MobileNetV2(multiplier, **kwargs)


def mobilenet1_0(**kwargs: Any) -> MobileNet:
    """MobileNet v1, width 1.0."""
    return get_mobilenet(1.0, **kwargs)


def mobilenet0_75(**kwargs: Any) -> MobileNet:
    """MobileNet v1, width 0.75."""
    return get_mobilenet(0.75, **kwargs)


def mobilenet0_5(**kwargs: Any) -> MobileNet:
    """MobileNet v1, width 0.5."""
    return get_mobilenet(0.5, **kwargs)


def mobilenet0_25(**kwargs: Any) -> MobileNet:
    """MobileNet v1, width 0.25."""
    return get_mobilenet(0.25, **kwargs)


def mobilenet_v2_1_0(**kwargs: Any) -> MobileNetV2:
    """MobileNet v2, width 1.0."""
    return get_mobilenet_v2(1.0, **kwargs)


def mobilenet_v2_0_75(**kwargs: Any) -> MobileNetV2:
    """MobileNet v2, width 0.75."""
    return get_mobilenet_v2(0.75, **kwargs)


def mobilenet_v2_0_5(**kwargs: Any) -> MobileNetV2:
    """MobileNet v2, width 0.5."""
    return get_mobilenet_v2(0.5, **kwargs)


def mobilenet_v2_0_25(**kwargs: Any) -> MobileNetV2:
    """MobileNet v2, width 0.25."""
    return get_mobilenet_v2(0.25, **kwargs)
