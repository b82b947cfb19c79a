"""VGG (Simonyan & Zisserman 2014): 11, 13, 16 or 19 layers, optionally with batch norm.

Same classes, arguments, initializers and parameter names as MXNet 1.9.1's
``gluon.model_zoo.vision`` (``vgg0_conv0_weight``, ``vgg0_dense0_weight``). Five 2×2 max
pools halve the input five times, so inputs from 32×32 up work; the first Dense layer's
width follows the input size (25088 inputs at 224×224).

>>> import engine as mx
>>> from engine.gluon.model_zoo import vision
>>> net = vision.vgg11_bn(classes=10)
>>> len(net.features), type(net.output).__name__
(33, 'Dense')
"""

from __future__ import annotations

from typing import Any

from .... import initializer
from ....context import Context
from ... import nn
from ...block import HybridBlock
from ..model_store import DEFAULT_ROOT, refuse_pretrained

__all__ = ["VGG", "get_vgg", "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn",
           "vgg19", "vgg19_bn"]


class VGG(HybridBlock):
    """``layers[i]`` 3×3 convolutions of ``filters[i]`` channels then a 2×2 max pool, per
    stage; two Dense(4096)+Dropout(0.5); Dense(classes)."""

    def __init__(self, layers: list[int], filters: list[int], classes: int = 1000,
                 batch_norm: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if len(layers) != len(filters):
            raise ValueError(f"VGG: layers and filters need one entry per stage, got "
                             f"{len(layers)} and {len(filters)}")
        with self.name_scope():
            self.features = self._make_features(layers, filters, batch_norm)
            for _ in range(2):
                self.features.add(nn.Dense(4096, activation="relu",
                                           weight_initializer="normal",
                                           bias_initializer="zeros"))
                self.features.add(nn.Dropout(rate=0.5))
            self.output = nn.Dense(classes, weight_initializer="normal",
                                   bias_initializer="zeros")

    def _make_features(self, layers: list[int], filters: list[int],
                       batch_norm: bool) -> nn.HybridSequential:
        features = nn.HybridSequential(prefix="")
        for count, width in zip(layers, filters, strict=True):
            for _ in range(count):
                features.add(nn.Conv2D(width, kernel_size=3, padding=1,
                                       weight_initializer=initializer.Xavier(
                                           rnd_type="gaussian", factor_type="out",
                                           magnitude=2),
                                       bias_initializer="zeros"))
                if batch_norm:
                    features.add(nn.BatchNorm())
                features.add(nn.Activation("relu"))
            features.add(nn.MaxPool2D(strides=2))
        return features

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return self.output(self.features(x))


# depth -> (convolutions per stage, channels per stage)
vgg_spec: dict[int, tuple[list[int], list[int]]] = {
    11: ([1, 1, 2, 2, 2], [64, 128, 256, 512, 512]),
    13: ([2, 2, 2, 2, 2], [64, 128, 256, 512, 512]),
    16: ([2, 2, 3, 3, 3], [64, 128, 256, 512, 512]),
    19: ([2, 2, 4, 4, 4], [64, 128, 256, 512, 512]),
}


def get_vgg(num_layers: int, pretrained: bool = False, ctx: Context | None = None,
            root: str = DEFAULT_ROOT, **kwargs: Any) -> VGG:
    """VGG with ``num_layers`` (11, 13, 16, 19) layers; ``batch_norm=True`` adds BN."""
    if num_layers not in vgg_spec:
        raise ValueError(f"Invalid number of layers: {num_layers}. Options are "
                         f"{sorted(vgg_spec)}")
    suffix = "_bn" if kwargs.get("batch_norm") else ""
    refuse_pretrained(pretrained, f"vgg{num_layers}{suffix}", root)
    layers, filters = vgg_spec[num_layers]
    return VGG(layers, filters, **kwargs)


def vgg11(**kwargs: Any) -> VGG:
    """VGG-11."""
    return get_vgg(11, **kwargs)


def vgg13(**kwargs: Any) -> VGG:
    """VGG-13."""
    return get_vgg(13, **kwargs)


def vgg16(**kwargs: Any) -> VGG:
    """VGG-16."""
    return get_vgg(16, **kwargs)


def vgg19(**kwargs: Any) -> VGG:
    """VGG-19."""
    return get_vgg(19, **kwargs)


def vgg11_bn(**kwargs: Any) -> VGG:
    """VGG-11 with batch norm after every convolution."""
    return get_vgg(11, **{**kwargs, "batch_norm": True})


def vgg13_bn(**kwargs: Any) -> VGG:
    """VGG-13 with batch norm after every convolution."""
    return get_vgg(13, **{**kwargs, "batch_norm": True})


def vgg16_bn(**kwargs: Any) -> VGG:
    """VGG-16 with batch norm after every convolution."""
    return get_vgg(16, **{**kwargs, "batch_norm": True})


def vgg19_bn(**kwargs: Any) -> VGG:
    """VGG-19 with batch norm after every convolution."""
    return get_vgg(19, **{**kwargs, "batch_norm": True})
