"""``Reshape``: a layer that reshapes its input (MXNet's ``Reshape`` operator as a block).

Gluon 1.x has no reshape layer (users write ``HybridLambda(lambda F, x: F.reshape(...))``);
a declarative network (a job spec's layer list) cannot hold a lambda, so this names one.
``shape`` is the whole output shape, batch axis included, with MXNet's codes: ``0`` copies
that input dimension, ``-1`` infers one dimension from the others.

>>> import engine as mx
>>> from engine.gluon import nn
>>> nn.Reshape(shape=(0, 1, 8, 8))(mx.nd.ones((2, 64))).shape
(2, 1, 8, 8)
"""

from __future__ import annotations

from typing import Any

from ..block import HybridBlock
from .registry import register


@register
class Reshape(HybridBlock):
    def __init__(self, shape: tuple[int, ...] | list[int], prefix: str | None = None,
                 params: Any = None) -> None:
        super().__init__(prefix=prefix, params=params)
        shape = tuple(int(d) for d in shape)
        if not shape or any(d < -1 for d in shape) or shape.count(-1) > 1:
            raise ValueError(f"Reshape: shape {shape} must be non-empty, of dimensions >= 0 "
                             "(0 copies the input's) and at most one -1")
        self._shape = shape

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return F.reshape(x, shape=self._shape)

    def __repr__(self) -> str:
        return f"Reshape(shape={self._shape})"
