"""AlexNet (Krizhevsky et al. 2012), as MXNet 1.9.1's ``gluon.model_zoo.vision`` builds it
(same arguments and parameter names, ``alexnet0_conv0_weight`` ...). Three 3×3/2 max
pools after an 11×11/4 convolution need inputs of at least 63×63.

>>> import engine as mx
>>> from engine.gluon.model_zoo import vision
>>> net = vision.alexnet(classes=10)
>>> net.initialize()
>>> net(mx.nd.ones((1, 3, 64, 64))).shape
(1, 10)
"""

from __future__ import annotations

from typing import Any

from ....context import Context
from ... import nn
from ...block import HybridBlock
from ..model_store import DEFAULT_ROOT, refuse_pretrained

__all__ = ["AlexNet", "alexnet"]


class AlexNet(HybridBlock):
    """Five convolutions (ReLU) with three max pools, two Dense(4096)+Dropout(0.5),
    Dense(classes)."""

    def __init__(self, classes: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            with self.features.name_scope():
                self.features.add(
                    nn.Conv2D(64, kernel_size=11, strides=4, padding=2, activation="relu"),
                    nn.MaxPool2D(pool_size=3, strides=2),
                    nn.Conv2D(192, kernel_size=5, padding=2, activation="relu"),
                    nn.MaxPool2D(pool_size=3, strides=2),
                    nn.Conv2D(384, kernel_size=3, padding=1, activation="relu"),
                    nn.Conv2D(256, kernel_size=3, padding=1, activation="relu"),
                    nn.Conv2D(256, kernel_size=3, padding=1, activation="relu"),
                    nn.MaxPool2D(pool_size=3, strides=2),
                    nn.Flatten(),
                    nn.Dense(4096, activation="relu"),
                    nn.Dropout(0.5),
                    nn.Dense(4096, activation="relu"),
                    nn.Dropout(0.5),
                )
            self.output = nn.Dense(classes)

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return self.output(self.features(x))


def alexnet(pretrained: bool = False, ctx: Context | None = None, root: str = DEFAULT_ROOT,
            **kwargs: Any) -> AlexNet:
    """AlexNet; ``kwargs`` (``classes``, ``prefix``...) go to :class:`AlexNet`."""
    refuse_pretrained(pretrained, "alexnet", root)
    return AlexNet(**kwargs)
