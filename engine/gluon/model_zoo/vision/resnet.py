"""ResNet v1 (He et al. 2015) and v2 (pre-activation, He et al. 2016): 18 to 152 layers.

Same classes, arguments and parameter names as MXNet 1.9.1's ``gluon.model_zoo.vision``.
A residual block does not open its own name scope, so its layers are numbered within
its stage (``resnetv10_stage1_conv0_weight``), as in MXNet. ``thumbnail=True`` replaces
the 7×7/2 stem and its max pool with a 3×3/1 convolution, for 32×32 inputs.

>>> import engine as mx
>>> from engine.gluon.model_zoo import vision
>>> net = vision.resnet18_v1(classes=10, thumbnail=True, prefix="r18_")
>>> net.initialize()
>>> net(mx.nd.ones((1, 3, 32, 32))).shape
(1, 10)
>>> [k for k in net.collect_params().keys()][:2]
['r18_conv0_weight', 'r18_stage1_conv0_weight']
"""

from __future__ import annotations

from typing import Any

from ....context import Context
from ... import nn
from ...block import HybridBlock
from ..model_store import DEFAULT_ROOT, refuse_pretrained

__all__ = [
    "BasicBlockV1", "BasicBlockV2", "BottleneckV1", "BottleneckV2", "ResNetV1", "ResNetV2",
    "get_resnet", "resnet101_v1", "resnet101_v2", "resnet152_v1", "resnet152_v2",
    "resnet18_v1", "resnet18_v2", "resnet34_v1", "resnet34_v2", "resnet50_v1", "resnet50_v2",
]


def _conv3x3(channels: int, stride: int, in_channels: int) -> nn.Conv2D:
    return nn.Conv2D(channels, kernel_size=3, strides=stride, padding=1, use_bias=False,
                     in_channels=in_channels)


def _projection(channels: int, stride: int, in_channels: int) -> nn.Conv2D:
    """The 1×1 convolution that brings the shortcut to the body's shape."""
    return nn.Conv2D(channels, kernel_size=1, strides=stride, use_bias=False,
                     in_channels=in_channels)


def _projection_v1(channels: int, stride: int, in_channels: int) -> nn.HybridSequential:
    shortcut = nn.HybridSequential(prefix="")
    shortcut.add(_projection(channels, stride, in_channels), nn.BatchNorm())
    return shortcut


class BasicBlockV1(HybridBlock):
    """Two 3×3 convolutions with batch norm; ReLU after the residual sum (ResNet-18/34)."""

    def __init__(self, channels: int, stride: int, downsample: bool = False,
                 in_channels: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.body = nn.HybridSequential(prefix="")
        self.body.add(_conv3x3(channels, stride, in_channels), nn.BatchNorm(),
                      nn.Activation("relu"), _conv3x3(channels, 1, channels), nn.BatchNorm())
        self.downsample = _projection_v1(channels, stride, in_channels) if downsample else None

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        shortcut = self.downsample(x) if self.downsample is not None else x
        return F.Activation(shortcut + self.body(x), act_type="relu")


class BottleneckV1(HybridBlock):
    """1×1 reduce, 3×3, 1×1 expand (to ``channels``), each with batch norm (ResNet-50+)."""

    def __init__(self, channels: int, stride: int, downsample: bool = False,
                 in_channels: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        narrow = channels // 4
        self.body = nn.HybridSequential(prefix="")
        self.body.add(nn.Conv2D(narrow, kernel_size=1, strides=stride), nn.BatchNorm(),
                      nn.Activation("relu"), _conv3x3(narrow, 1, narrow), nn.BatchNorm(),
                      nn.Activation("relu"), nn.Conv2D(channels, kernel_size=1, strides=1),
                      nn.BatchNorm())
        self.downsample = _projection_v1(channels, stride, in_channels) if downsample else None

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        shortcut = self.downsample(x) if self.downsample is not None else x
        return F.Activation(self.body(x) + shortcut, act_type="relu")


class BasicBlockV2(HybridBlock):
    """Pre-activation basic block: BN-ReLU-conv twice; the shortcut is not activated."""

    def __init__(self, channels: int, stride: int, downsample: bool = False,
                 in_channels: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bn1 = nn.BatchNorm()
        self.conv1 = _conv3x3(channels, stride, in_channels)
        self.bn2 = nn.BatchNorm()
        self.conv2 = _conv3x3(channels, 1, channels)
        self.downsample = _projection(channels, stride, in_channels) if downsample else None

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        shortcut = x
        x = F.Activation(self.bn1(x), act_type="relu")
        if self.downsample is not None:  # v2 projects the pre-activated input
            shortcut = self.downsample(x)
        x = self.conv1(x)
        x = self.conv2(F.Activation(self.bn2(x), act_type="relu"))
        return x + shortcut


class BottleneckV2(HybridBlock):
    """Pre-activation bottleneck: BN-ReLU before each of the 1×1, 3×3, 1×1 convolutions."""

    def __init__(self, channels: int, stride: int, downsample: bool = False,
                 in_channels: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        narrow = channels // 4
        self.bn1 = nn.BatchNorm()
        self.conv1 = nn.Conv2D(narrow, kernel_size=1, strides=1, use_bias=False)
        self.bn2 = nn.BatchNorm()
        self.conv2 = _conv3x3(narrow, stride, narrow)
        self.bn3 = nn.BatchNorm()
        self.conv3 = nn.Conv2D(channels, kernel_size=1, strides=1, use_bias=False)
        self.downsample = _projection(channels, stride, in_channels) if downsample else None

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        shortcut = x
        x = F.Activation(self.bn1(x), act_type="relu")
        if self.downsample is not None:
            shortcut = self.downsample(x)
        x = self.conv1(x)
        x = self.conv2(F.Activation(self.bn2(x), act_type="relu"))
        x = self.conv3(F.Activation(self.bn3(x), act_type="relu"))
        return x + shortcut


def _check_layout(layers: list[int], channels: list[int]) -> None:
    if len(layers) != len(channels) - 1:
        raise ValueError(f"ResNet: channels needs one entry more than layers (the stem's), "
                         f"got {len(layers)} layers and {len(channels)} channels")


def _stage(block: type[HybridBlock], count: int, channels: int, stride: int, index: int,
           in_channels: int) -> nn.HybridSequential:
    """``count`` residual blocks named ``stage<index>_``; the first one may downsample."""
    stage = nn.HybridSequential(prefix=f"stage{index}_")
    with stage.name_scope():
        stage.add(block(channels, stride, channels != in_channels, in_channels=in_channels,
                        prefix=""))
        for _ in range(count - 1):
            stage.add(block(channels, 1, False, in_channels=channels, prefix=""))
    return stage


def _stem(features: nn.HybridSequential, channels: int, thumbnail: bool) -> None:
    if thumbnail:
        features.add(_conv3x3(channels, 1, 0))
    else:
        features.add(nn.Conv2D(channels, 7, 2, 3, use_bias=False), nn.BatchNorm(),
                     nn.Activation("relu"), nn.MaxPool2D(3, 2, 1))


class ResNetV1(HybridBlock):
    """ResNet v1: stem, four stages of ``block``, global average pool, Dense(classes).

    ``layers[i]`` blocks of ``channels[i + 1]`` channels in stage i; ``channels[0]`` is
    the stem's width.
    """

    def __init__(self, block: type[HybridBlock], layers: list[int], channels: list[int],
                 classes: int = 1000, thumbnail: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _check_layout(layers, channels)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            _stem(self.features, channels[0], thumbnail)
            for i, count in enumerate(layers):
                self.features.add(_stage(block, count, channels[i + 1], 1 if i == 0 else 2,
                                         i + 1, channels[i]))
            self.features.add(nn.GlobalAvgPool2D())
            self.output = nn.Dense(classes, in_units=channels[-1])

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return self.output(self.features(x))


class ResNetV2(HybridBlock):
    """ResNet v2: input batch norm (no scale/shift), stem, pre-activation stages, a final
    BN-ReLU, global average pool, Flatten, Dense(classes)."""

    def __init__(self, block: type[HybridBlock], layers: list[int], channels: list[int],
                 classes: int = 1000, thumbnail: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _check_layout(layers, channels)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(nn.BatchNorm(scale=False, center=False))
            _stem(self.features, channels[0], thumbnail)
            in_channels = channels[0]
            for i, count in enumerate(layers):
                self.features.add(_stage(block, count, channels[i + 1], 1 if i == 0 else 2,
                                         i + 1, in_channels))
                in_channels = channels[i + 1]
            self.features.add(nn.BatchNorm(), nn.Activation("relu"), nn.GlobalAvgPool2D(),
                              nn.Flatten())
            self.output = nn.Dense(classes, in_units=in_channels)

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return self.output(self.features(x))


# depth -> (block kind, blocks per stage, [stem width, stage widths...])
resnet_spec: dict[int, tuple[str, list[int], list[int]]] = {
    18: ("basic_block", [2, 2, 2, 2], [64, 64, 128, 256, 512]),
    34: ("basic_block", [3, 4, 6, 3], [64, 64, 128, 256, 512]),
    50: ("bottle_neck", [3, 4, 6, 3], [64, 256, 512, 1024, 2048]),
    101: ("bottle_neck", [3, 4, 23, 3], [64, 256, 512, 1024, 2048]),
    152: ("bottle_neck", [3, 8, 36, 3], [64, 256, 512, 1024, 2048]),
}
resnet_net_versions = [ResNetV1, ResNetV2]
resnet_block_versions: list[dict[str, type[HybridBlock]]] = [
    {"basic_block": BasicBlockV1, "bottle_neck": BottleneckV1},
    {"basic_block": BasicBlockV2, "bottle_neck": BottleneckV2},
]


def get_resnet(version: int, num_layers: int, pretrained: bool = False,
               ctx: Context | None = None, root: str = DEFAULT_ROOT,
               **kwargs: Any) -> HybridBlock:
    """ResNet v``version`` (1 or 2) with ``num_layers`` (18, 34, 50, 101 or 152) layers;
    ``kwargs`` (``classes``, ``thumbnail``, ``prefix``...) go to the network."""
    if num_layers not in resnet_spec:
        raise ValueError(f"Invalid number of layers: {num_layers}. Options are "
                         f"{sorted(resnet_spec)}")
    if version not in (1, 2):
        raise ValueError(f"Invalid resnet version: {version}. Options are 1 and 2.")
    refuse_pretrained(pretrained, f"resnet{num_layers}_v{version}", root)
    kind, layers, channels = resnet_spec[num_layers]
    block = resnet_block_versions[version - 1][kind]
    net: HybridBlock = resnet_net_versions[version - 1](block, layers, channels, **kwargs)
    return net


def _constructor(version: int, depth: int) -> Any:
    def build(**kwargs: Any) -> HybridBlock:
        return get_resnet(version, depth, **kwargs)

    build.__name__ = build.__qualname__ = f"resnet{depth}_v{version}"
    build.__doc__ = (f"ResNet-{depth} v{version}; accepts ``classes``, ``thumbnail``, "
                     "``pretrained`` (refused), ``ctx``, ``root`` and Block arguments.")
    return build


resnet18_v1 = _constructor(1, 18)
resnet34_v1 = _constructor(1, 34)
resnet50_v1 = _constructor(1, 50)
resnet101_v1 = _constructor(1, 101)
resnet152_v1 = _constructor(1, 152)
resnet18_v2 = _constructor(2, 18)
resnet34_v2 = _constructor(2, 34)
resnet50_v2 = _constructor(2, 50)
resnet101_v2 = _constructor(2, 101)
resnet152_v2 = _constructor(2, 152)
