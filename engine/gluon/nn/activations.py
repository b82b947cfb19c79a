"""Activation layers: ``Activation``, ``LeakyReLU``, ``PReLU``, ``ELU``, ``SELU``, ``GELU``,
``Swish``.

>>> import engine as mx
>>> mx.gluon.nn.LeakyReLU(0.1)(mx.nd.array([-1.0, 2.0])).asnumpy().tolist()
[-0.10000000149011612, 2.0]
"""

from __future__ import annotations

from typing import Any

from ... import initializer as _init
from ..block import HybridBlock
from ..hybrid.hybrid_block import graph_name
from .registry import register


@register
class Activation(HybridBlock):
    """``act_type``: relu, sigmoid, tanh, softrelu, softsign (also log_sigmoid, mish)."""

    def __init__(self, activation: str, **kwargs: Any) -> None:
        self._act_type = activation
        super().__init__(**kwargs)

    def _alias(self) -> str:
        return self._act_type

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return F.Activation(x, act_type=self._act_type, **graph_name(F))

    def __repr__(self) -> str:
        return f"Activation({self._act_type})"


@register
class LeakyReLU(HybridBlock):
    """``x`` if ``x > 0`` else ``alpha * x``."""

    def __init__(self, alpha: float, **kwargs: Any) -> None:
        if alpha < 0:
            raise ValueError(f"LeakyReLU alpha must be >= 0, got {alpha}")
        super().__init__(**kwargs)
        self._alpha = alpha

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return F.LeakyReLU(x, act_type="leaky", slope=self._alpha, **graph_name(F))

    def __repr__(self) -> str:
        return f"LeakyReLU({self._alpha})"


@register
class PReLU(HybridBlock):
    """Leaky ReLU with a learned slope per channel (``alpha``, initialized to 0.25)."""

    def __init__(self, alpha_initializer: Any = None, in_channels: int = 1,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        init = alpha_initializer if alpha_initializer is not None else _init.Constant(0.25)
        with self.name_scope():
            self.alpha = self.params.get("alpha", shape=(in_channels,), init=init)

    def hybrid_forward(self, F: Any, x: Any, alpha: Any) -> Any:  # noqa: N803
        return F.LeakyReLU(x, gamma=alpha, act_type="prelu", **graph_name(F))


@register
class ELU(HybridBlock):
    """``x`` if ``x > 0`` else ``alpha * (exp(x) - 1)``."""

    def __init__(self, alpha: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._alpha = alpha

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return F.LeakyReLU(x, act_type="elu", slope=self._alpha)


@register
class SELU(HybridBlock):
    """Scaled ELU (Klambauer et al.)."""

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return F.LeakyReLU(x, act_type="selu", **graph_name(F))


@register
class GELU(HybridBlock):
    """Gaussian error linear unit, computed by ``LeakyReLU(act_type='gelu')``."""

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return F.LeakyReLU(x, act_type="gelu", **graph_name(F))


@register
class Swish(HybridBlock):
    """``x * sigmoid(beta * x)``."""

    def __init__(self, beta: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._beta = beta

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return x * F.sigmoid(self._beta * x, **graph_name(F))
