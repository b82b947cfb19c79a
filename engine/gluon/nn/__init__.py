"""``engine.gluon.nn``: Gluon's neural-network layers, and a registry to build them by name.

>>> from engine.gluon import nn
>>> layer = nn.create("Dense", units=128, activation="relu")
>>> layer.name.startswith("dense")
True
"""

from ..block import Block, HybridBlock
from .activations import ELU, GELU, SELU, Activation, LeakyReLU, PReLU, Swish
from .basic_layers import (
    BatchNorm,
    Dense,
    Dropout,
    Embedding,
    Flatten,
    HybridLambda,
    HybridSequential,
    Lambda,
    LayerNorm,
    Sequential,
)
from .conv_layers import (
    Conv1D,
    Conv1DTranspose,
    Conv2D,
    Conv2DTranspose,
    Conv3D,
    Conv3DTranspose,
)
from .norm_layers import BatchNormReLU, GroupNorm, InstanceNorm, ReflectionPad2D
from .pool_layers import (
    AvgPool1D,
    AvgPool2D,
    AvgPool3D,
    GlobalAvgPool1D,
    GlobalAvgPool2D,
    GlobalAvgPool3D,
    GlobalMaxPool1D,
    GlobalMaxPool2D,
    GlobalMaxPool3D,
    MaxPool1D,
    MaxPool2D,
    MaxPool3D,
)
from .registry import LAYERS, create, names, register
from .shape_layers import Reshape


def __getattr__(name: str) -> object:
    # MXNet lists SymbolBlock in gluon.nn too; it lives with export/imports (engine.gluon)
    if name == "SymbolBlock":
        from ..symbol_block import SymbolBlock

        return SymbolBlock
    raise AttributeError(f"module 'engine.gluon.nn' has no attribute {name!r}")

__all__ = [
    "Activation", "AvgPool1D", "AvgPool2D", "BatchNorm", "Block", "Conv1D", "Conv2D", "Dense",
    "Dropout", "ELU", "Embedding", "Flatten", "GELU", "GlobalAvgPool1D", "GlobalAvgPool2D",
    "GlobalMaxPool1D", "GlobalMaxPool2D", "HybridBlock", "MaxPool1D",
    "HybridLambda", "HybridSequential", "LAYERS", "Lambda", "LayerNorm", "LeakyReLU",
    "MaxPool2D", "PReLU", "SELU", "Sequential", "Swish", "create", "names", "register",
    "AvgPool3D", "Conv1DTranspose", "Conv2DTranspose", "Conv3D", "Conv3DTranspose",
    "GlobalAvgPool3D", "GlobalMaxPool3D", "MaxPool3D",
]
__all__ += ["BatchNormReLU", "GroupNorm", "InstanceNorm", "ReflectionPad2D"]
__all__ += ["Reshape"]
