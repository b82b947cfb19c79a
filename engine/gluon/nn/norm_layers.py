"""Per-sample normalization and padding layers: ``InstanceNorm``, ``GroupNorm``,
``BatchNormReLU`` and ``ReflectionPad2D`` (MXNet 1.9.1's ``gluon.nn`` names).

>>> import engine as mx
>>> layer = mx.gluon.nn.InstanceNorm(); layer.initialize()
>>> layer(mx.nd.array([[[1.0, 3.0]]])).asnumpy().round(3).tolist()
[[[-1.0, 1.0]]]
"""

from __future__ import annotations

from numbers import Number
from typing import Any

from ..block import HybridBlock
from ..hybrid.hybrid_block import graph_name
from .basic_layers import BatchNorm
from .registry import register


def _scale_shift_params(block: HybridBlock, size: int, center: bool, scale: bool,
                        gamma_init: Any, beta_init: Any) -> None:
    # MXNet keeps gamma/beta even when scale/center are off; they are then frozen at init
    block.gamma = block.params.get("gamma", grad_req="write" if scale else "null",
                                   shape=(size,), init=gamma_init, allow_deferred_init=True)
    block.beta = block.params.get("beta", grad_req="write" if center else "null",
                                  shape=(size,), init=beta_init, allow_deferred_init=True)


@register
class InstanceNorm(HybridBlock):
    """Normalizes each sample's channel over its spatial axes; ``axis`` is the channel axis.
    ``scale`` defaults to False (gamma stays 1), as in MXNet."""

    def __init__(self, axis: int = 1, epsilon: float = 1e-5, center: bool = True,
                 scale: bool = False, beta_initializer: Any = "zeros",
                 gamma_initializer: Any = "ones", in_channels: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._kwargs = {"eps": epsilon, "axis": axis, "center": center, "scale": scale}
        self._axis = axis
        self._epsilon = epsilon
        with self.name_scope():
            _scale_shift_params(self, in_channels, center, scale, gamma_initializer,
                                beta_initializer)

    def infer_shape(self, x: Any, *args: Any) -> None:
        self.gamma.shape = (x.shape[self._axis],)
        self.beta.shape = (x.shape[self._axis],)

    def hybrid_forward(self, F: Any, x: Any, gamma: Any, beta: Any) -> Any:  # noqa: N803
        if self._axis == 1:
            return F.InstanceNorm(x, gamma, beta, eps=self._epsilon, **graph_name(F))
        x = x.swapaxes(1, self._axis)
        return F.InstanceNorm(x, gamma, beta, eps=self._epsilon).swapaxes(1, self._axis)

    def __repr__(self) -> str:
        content = ", ".join(f"{k}={v!r}" for k, v in self._kwargs.items())
        channels = self.gamma.shape[0] if self.gamma.shape else 0
        return f"InstanceNorm({content}, in_channels={channels})"


@register
class GroupNorm(HybridBlock):
    """Normalizes groups of channels (axis 1) per sample; gamma/beta have one value per
    group (MXNet 1.9.1's shapes)."""

    def __init__(self, num_groups: int = 1, epsilon: float = 1e-5, center: bool = True,
                 scale: bool = True, beta_initializer: Any = "zeros",
                 gamma_initializer: Any = "ones", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._kwargs = {"eps": epsilon, "num_groups": num_groups, "center": center,
                        "scale": scale}
        self._num_groups = num_groups
        self._epsilon = epsilon
        with self.name_scope():
            _scale_shift_params(self, num_groups, center, scale, gamma_initializer,
                                beta_initializer)

    def hybrid_forward(self, F: Any, x: Any, gamma: Any, beta: Any) -> Any:  # noqa: N803
        return F.GroupNorm(x, gamma=gamma, beta=beta, num_groups=self._num_groups,
                           eps=self._epsilon)

    def __repr__(self) -> str:
        return "GroupNorm(" + ", ".join(f"{k}={v!r}" for k, v in self._kwargs.items()) + ")"


@register
class BatchNormReLU(BatchNorm):
    """``BatchNorm`` followed by ReLU (MXNet fuses them; the numbers are the same)."""

    def hybrid_forward(self, F: Any, x: Any, gamma: Any, beta: Any, running_mean: Any,  # noqa: N803
                       running_var: Any) -> Any:
        out = super().hybrid_forward(F, x, gamma, beta, running_mean, running_var)
        return F.relu(out)


@register
class ReflectionPad2D(HybridBlock):
    """Pads the last two axes of (N, C, H, W) by reflecting the borders; ``padding`` is an
    int (all four sides) or MXNet's 8-tuple ``pad_width``."""

    def __init__(self, padding: Any = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(padding, Number):
            p = int(padding)
            padding = (0, 0, 0, 0, p, p, p, p)
        if len(padding) != 8:
            raise AssertionError(f"ReflectionPad2D padding must have 8 values, got {padding}")
        self._padding = tuple(padding)

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return F.pad(x, mode="reflect", pad_width=self._padding)
