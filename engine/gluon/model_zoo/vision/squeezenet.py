"""SqueezeNet 1.0 and 1.1 (Iandola et al. 2016), as MXNet 1.9.1's
``gluon.model_zoo.vision`` builds them (same arguments and parameter names,
``squeezenet0_conv0_weight`` ...). The classifier ends in a 13×13 average pool, which
needs 224×224 inputs.

>>> from engine.gluon.model_zoo import vision
>>> net = vision.squeezenet1_1(classes=10)
>>> len(net.features), len(net.output)
(14, 4)
"""

from __future__ import annotations

from typing import Any

from ....context import Context
from ... import nn
from ...block import HybridBlock
from ...contrib.nn import HybridConcurrent
from ..model_store import DEFAULT_ROOT, refuse_pretrained

__all__ = ["SqueezeNet", "get_squeezenet", "squeezenet1_0", "squeezenet1_1"]


def _make_fire_conv(channels: int, kernel_size: int, padding: int = 0) -> nn.HybridSequential:
    conv = nn.HybridSequential(prefix="")
    conv.add(nn.Conv2D(channels, kernel_size, padding=padding), nn.Activation("relu"))
    return conv


def _make_fire(squeeze_channels: int, expand1x1_channels: int,
               expand3x3_channels: int) -> nn.HybridSequential:
    """A fire module: 1×1 squeeze, then 1×1 and 3×3 expansions joined on the channels."""
    fire = nn.HybridSequential(prefix="")
    fire.add(_make_fire_conv(squeeze_channels, 1))
    paths = HybridConcurrent(axis=1, prefix="")
    paths.add(_make_fire_conv(expand1x1_channels, 1))
    paths.add(_make_fire_conv(expand3x3_channels, 3, 1))
    fire.add(paths)
    return fire


def _ceil_pool() -> nn.MaxPool2D:
    return nn.MaxPool2D(pool_size=3, strides=2, ceil_mode=True)


class SqueezeNet(HybridBlock):
    """SqueezeNet ``version`` "1.0" or "1.1" (1.1: a 3×3 stem and earlier pools, ~2.4× less
    computation); a 1×1 conv classifier + ReLU, 13×13 average pool, Flatten."""

    def __init__(self, version: str, classes: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if version not in ("1.0", "1.1"):
            raise ValueError(f"Unsupported SqueezeNet version {version}: 1.0 or 1.1 expected")
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            if version == "1.0":
                self.features.add(nn.Conv2D(96, kernel_size=7, strides=2),
                                  nn.Activation("relu"), _ceil_pool(),
                                  _make_fire(16, 64, 64), _make_fire(16, 64, 64),
                                  _make_fire(32, 128, 128), _ceil_pool(),
                                  _make_fire(32, 128, 128), _make_fire(48, 192, 192),
                                  _make_fire(48, 192, 192), _make_fire(64, 256, 256),
                                  _ceil_pool(), _make_fire(64, 256, 256))
            else:
                self.features.add(nn.Conv2D(64, kernel_size=3, strides=2),
                                  nn.Activation("relu"), _ceil_pool(),
                                  _make_fire(16, 64, 64), _make_fire(16, 64, 64),
                                  _ceil_pool(),
                                  _make_fire(32, 128, 128), _make_fire(32, 128, 128),
                                  _ceil_pool(),
                                  _make_fire(48, 192, 192), _make_fire(48, 192, 192),
                                  _make_fire(64, 256, 256), _make_fire(64, 256, 256))
            self.features.add(nn.Dropout(0.5))
            self.output = nn.HybridSequential(prefix="")
            self.output.add(nn.Conv2D(classes, kernel_size=1), nn.Activation("relu"),
                            nn.AvgPool2D(13), nn.Flatten())

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return self.output(self.features(x))


def get_squeezenet(version: str, pretrained: bool = False, ctx: Context | None = None,
                   root: str = DEFAULT_ROOT, **kwargs: Any) -> SqueezeNet:
    """SqueezeNet ``version`` ("1.0" or "1.1")."""
    refuse_pretrained(pretrained, f"squeezenet{version}", root)
    return SqueezeNet(version, **kwargs)


def squeezenet1_0(**kwargs: Any) -> SqueezeNet:
    """SqueezeNet 1.0."""
    return get_squeezenet("1.0", **kwargs)


def squeezenet1_1(**kwargs: Any) -> SqueezeNet:
    """SqueezeNet 1.1."""
    return get_squeezenet("1.1", **kwargs)
