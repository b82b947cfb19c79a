"""Inception v3 (Szegedy et al. 2015), as MXNet 1.9.1's ``gluon.model_zoo.vision`` builds
it: same arguments and parameter names (``inception30_A1_conv0_weight`` ...). Every
convolution is Conv (no bias) + BatchNorm(epsilon=0.001) + ReLU; each mixed block is a
``HybridConcurrent`` of branches named ``A1_`` ... ``E2_``. The final 8×8 average pool
needs the 299×299 input the net was designed for.

>>> from engine.gluon.model_zoo import vision
>>> net = vision.inception_v3(classes=10)
>>> [type(b).__name__ for b in net.features][7:9]
['HybridConcurrent', 'HybridConcurrent']
"""

from __future__ import annotations

from typing import Any

from ....context import Context
from ... import nn
from ...block import HybridBlock
from ...contrib.nn import HybridConcurrent
from ..model_store import DEFAULT_ROOT, refuse_pretrained

__all__ = ["Inception3", "inception_v3"]

# one convolution of a branch: (channels, kernel_size, strides, padding); None = default
ConvSetting = tuple[int, Any, Any, Any]
_SETTING_NAMES = ("channels", "kernel_size", "strides", "padding")


def _make_basic_conv(**kwargs: Any) -> nn.HybridSequential:
    conv = nn.HybridSequential(prefix="")
    conv.add(nn.Conv2D(use_bias=False, **kwargs), nn.BatchNorm(epsilon=0.001),
             nn.Activation("relu"))
    return conv


def _make_branch(use_pool: str | None, *conv_settings: ConvSetting) -> nn.HybridSequential:
    """An optional pool ('avg': 3×3/1 padded, 'max': 3×3/2) then the convolutions."""
    branch = nn.HybridSequential(prefix="")
    if use_pool == "avg":
        branch.add(nn.AvgPool2D(pool_size=3, strides=1, padding=1))
    elif use_pool == "max":
        branch.add(nn.MaxPool2D(pool_size=3, strides=2))
    for setting in conv_settings:
        kwargs = {k: v for k, v in zip(_SETTING_NAMES, setting, strict=True) if v is not None}
        branch.add(_make_basic_conv(**kwargs))
    return branch


def _mixed(prefix: str, *branches: Any) -> HybridConcurrent:
    """A block of ``branches`` (built inside its name scope) joined on the channel axis;
    each entry is a ``(use_pool, *conv_settings)`` tuple or a callable building a block."""
    block = HybridConcurrent(axis=1, prefix=prefix)
    with block.name_scope():
        for branch in branches:
            block.add(branch() if callable(branch) else _make_branch(*branch))
    return block


def _make_A(pool_features: int, prefix: str) -> HybridConcurrent:  # noqa: N802
    return _mixed(prefix,
                  (None, (64, 1, None, None)),
                  (None, (48, 1, None, None), (64, 5, None, 2)),
                  (None, (64, 1, None, None), (96, 3, None, 1), (96, 3, None, 1)),
                  ("avg", (pool_features, 1, None, None)))


def _make_B(prefix: str) -> HybridConcurrent:  # noqa: N802
    return _mixed(prefix,
                  (None, (384, 3, 2, None)),
                  (None, (64, 1, None, None), (96, 3, None, 1), (96, 3, 2, None)),
                  ("max",))


def _make_C(channels_7x7: int, prefix: str) -> HybridConcurrent:  # noqa: N802
    c = channels_7x7
    return _mixed(prefix,
                  (None, (192, 1, None, None)),
                  (None, (c, 1, None, None), (c, (1, 7), None, (0, 3)),
                   (192, (7, 1), None, (3, 0))),
                  (None, (c, 1, None, None), (c, (7, 1), None, (3, 0)),
                   (c, (1, 7), None, (0, 3)), (c, (7, 1), None, (3, 0)),
                   (192, (1, 7), None, (0, 3))),
                  ("avg", (192, 1, None, None)))


def _make_D(prefix: str) -> HybridConcurrent:  # noqa: N802
    return _mixed(prefix,
                  (None, (192, 1, None, None), (320, 3, 2, None)),
                  (None, (192, 1, None, None), (192, (1, 7), None, (0, 3)),
                   (192, (7, 1), None, (3, 0)), (192, 3, 2, None)),
                  ("max",))


def _split_3x3(head: nn.HybridSequential) -> nn.HybridSequential:
    """``head`` followed by parallel 1×3 and 3×1 convolutions of 384 channels each."""
    chain = nn.HybridSequential(prefix="")
    chain.add(head)
    split = HybridConcurrent(axis=1, prefix="")
    chain.add(split)
    split.add(_make_branch(None, (384, (1, 3), None, (0, 1))))
    split.add(_make_branch(None, (384, (3, 1), None, (1, 0))))
    return chain


def _make_E(prefix: str) -> HybridConcurrent:  # noqa: N802
    return _mixed(prefix,
                  (None, (320, 1, None, None)),
                  lambda: _split_3x3(_make_branch(None, (384, 1, None, None))),
                  lambda: _split_3x3(_make_branch(None, (448, 1, None, None),
                                                  (384, 3, None, 1))),
                  ("avg", (192, 1, None, None)))


class Inception3(HybridBlock):
    """Stem of five convolutions and two max pools, mixed blocks A1-A3, B, C1-C4, D, E1-E2,
    an 8×8 average pool, Dropout(0.5), Dense(classes)."""

    def __init__(self, classes: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(_make_basic_conv(channels=32, kernel_size=3, strides=2),
                              _make_basic_conv(channels=32, kernel_size=3),
                              _make_basic_conv(channels=64, kernel_size=3, padding=1),
                              nn.MaxPool2D(pool_size=3, strides=2),
                              _make_basic_conv(channels=80, kernel_size=1),
                              _make_basic_conv(channels=192, kernel_size=3),
                              nn.MaxPool2D(pool_size=3, strides=2),
                              _make_A(32, "A1_"), _make_A(64, "A2_"), _make_A(64, "A3_"),
                              _make_B("B_"),
                              _make_C(128, "C1_"), _make_C(160, "C2_"), _make_C(160, "C3_"),
                              _make_C(192, "C4_"),
                              _make_D("D_"), _make_E("E1_"), _make_E("E2_"),
                              nn.AvgPool2D(pool_size=8), nn.Dropout(0.5))
            self.output = nn.Dense(classes)

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return self.output(self.features(x))


def inception_v3(pretrained: bool = False, ctx: Context | None = None,
                 root: str = DEFAULT_ROOT, **kwargs: Any) -> Inception3:
    """Inception v3; ``kwargs`` (``classes``, ``prefix``...) go to :class:`Inception3`."""
    refuse_pretrained(pretrained, "inceptionv3", root)
    return Inception3(**kwargs)
