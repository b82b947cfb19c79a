"""DenseNet (Huang et al. 2016): 121, 161, 169 or 201 layers.

Same classes, arguments and parameter names as MXNet 1.9.1's ``gluon.model_zoo.vision``
(``densenet0_stage1_conv0_weight``). Each dense layer concatenates its input with its new
features through ``gluon.contrib.nn.HybridConcurrent``. The final 7×7 average pool needs
the 224×224 input the net was designed for (the feature map is input/32 wide).

>>> from engine.gluon.model_zoo import vision
>>> net = vision.densenet121(classes=10)
>>> len(net.features), type(net.features[4]).__name__
(15, 'HybridSequential')
"""

from __future__ import annotations

from typing import Any

from ....context import Context
from ... import nn
from ...block import HybridBlock
from ...contrib.nn import HybridConcurrent, Identity
from ..model_store import DEFAULT_ROOT, refuse_pretrained

__all__ = ["DenseNet", "densenet121", "densenet161", "densenet169", "densenet201",
           "get_densenet"]


def _make_dense_layer(growth_rate: int, bn_size: int, dropout: float) -> HybridConcurrent:
    """[input, BN-ReLU-conv1×1-BN-ReLU-conv3×3(growth_rate)] joined on the channel axis."""
    new_features = nn.HybridSequential(prefix="")
    new_features.add(nn.BatchNorm(), nn.Activation("relu"),
                     nn.Conv2D(bn_size * growth_rate, kernel_size=1, use_bias=False),
                     nn.BatchNorm(), nn.Activation("relu"),
                     nn.Conv2D(growth_rate, kernel_size=3, padding=1, use_bias=False))
    if dropout:
        new_features.add(nn.Dropout(dropout))
    joined = HybridConcurrent(axis=1, prefix="")
    joined.add(Identity())
    joined.add(new_features)
    return joined


def _make_dense_block(num_layers: int, bn_size: int, growth_rate: int, dropout: float,
                      stage_index: int) -> nn.HybridSequential:
    block = nn.HybridSequential(prefix=f"stage{stage_index}_")
    with block.name_scope():
        for _ in range(num_layers):
            block.add(_make_dense_layer(growth_rate, bn_size, dropout))
    return block


def _make_transition(num_output_features: int) -> nn.HybridSequential:
    """BN-ReLU-conv1×1 to ``num_output_features`` channels, then a 2×2 average pool."""
    transition = nn.HybridSequential(prefix="")
    transition.add(nn.BatchNorm(), nn.Activation("relu"),
                   nn.Conv2D(num_output_features, kernel_size=1, use_bias=False),
                   nn.AvgPool2D(pool_size=2, strides=2))
    return transition


class DenseNet(HybridBlock):
    """A 7×7/2 stem with max pool, dense blocks of ``block_config[i]`` layers separated by
    halving transitions, BN-ReLU, 7×7 average pool, Flatten, Dense(classes)."""

    def __init__(self, num_init_features: int, growth_rate: int, block_config: list[int],
                 bn_size: int = 4, dropout: float = 0, classes: int = 1000,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(nn.Conv2D(num_init_features, kernel_size=7, strides=2,
                                        padding=3, use_bias=False),
                              nn.BatchNorm(), nn.Activation("relu"),
                              nn.MaxPool2D(pool_size=3, strides=2, padding=1))
            num_features = num_init_features
            for i, num_layers in enumerate(block_config):
                self.features.add(_make_dense_block(num_layers, bn_size, growth_rate, dropout,
                                                    i + 1))
                num_features += num_layers * growth_rate
                if i != len(block_config) - 1:
                    num_features //= 2
                    self.features.add(_make_transition(num_features))
            self.features.add(nn.BatchNorm(), nn.Activation("relu"),
                              nn.AvgPool2D(pool_size=7), nn.Flatten())
            self.output = nn.Dense(classes)

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return self.output(self.features(x))


# depth -> (stem width, growth rate, layers per dense block)
densenet_spec: dict[int, tuple[int, int, list[int]]] = {
    121: (64, 32, [6, 12, 24, 16]),
    161: (96, 48, [6, 12, 36, 24]),
    169: (64, 32, [6, 12, 32, 32]),
    201: (64, 32, [6, 12, 48, 32]),
}


def get_densenet(num_layers: int, pretrained: bool = False, ctx: Context | None = None,
                 root: str = DEFAULT_ROOT, **kwargs: Any) -> DenseNet:
    """DenseNet with ``num_layers`` (121, 161, 169, 201) layers."""
    if num_layers not in densenet_spec:
        raise ValueError(f"Invalid number of layers: {num_layers}. Options are "
                         f"{sorted(densenet_spec)}")
    refuse_pretrained(pretrained, f"densenet{num_layers}", root)
    num_init_features, growth_rate, block_config = densenet_spec[num_layers]
    return DenseNet(num_init_features, growth_rate, block_config, **kwargs)


def densenet121(**kwargs: Any) -> DenseNet:
    """DenseNet-121."""
    return get_densenet(121, **kwargs)


def densenet161(**kwargs: Any) -> DenseNet:
    """DenseNet-161."""
    return get_densenet(161, **kwargs)


def densenet169(**kwargs: Any) -> DenseNet:
    """DenseNet-169."""
    return get_densenet(169, **kwargs)


def densenet201(**kwargs: Any) -> DenseNet:
    """DenseNet-201."""
    return get_densenet(201, **kwargs)
