"""``npx.random``: the numpy extension's draws (``bernoulli``, ``normal_n``, ``uniform_n``).

>>> from engine import npx
>>> npx.random.bernoulli(prob=1.0, size=(2,)).asnumpy().tolist()
[1.0, 1.0]
"""

from __future__ import annotations

from typing import Any

import numpy

from .. import random as _random
from ..context import current_context
from ..ndarray.ndarray import NDArray


def seed(seed_state: int, ctx: Any = "all") -> None:
    _random.seed(seed_state, ctx)


def _host(value: Any) -> Any:
    return value.asnumpy() if isinstance(value, NDArray) else value


def _array(values: Any, dtype: Any, ctx: Any) -> NDArray:
    ctx = ctx or current_context()
    return NDArray(ctx.xp.asarray(numpy.asarray(values).astype(dtype or numpy.float32)), ctx)


def bernoulli(prob: Any = None, logit: Any = None, size: Any = None, dtype: Any = None,
              ctx: Any = None, out: NDArray | None = None) -> NDArray:
    """1 with probability ``prob`` (or ``sigmoid(logit)``), else 0."""
    if (prob is None) == (logit is None):
        raise ValueError("npx.random.bernoulli: give exactly one of prob and logit")
    p = _host(prob) if prob is not None else 1.0 / (1.0 + numpy.exp(-_host(logit)))
    shape = numpy.shape(p) if size is None else size
    result = _array(_random.generator().random(shape) < p, dtype, ctx)
    if out is not None:
        out[...] = result
        return out
    return result


def _batch_shape(params: list[Any], batch_shape: Any) -> tuple[int, ...]:
    shape = numpy.broadcast_shapes(*(numpy.shape(p) for p in params))
    extra = () if batch_shape is None else (
        (batch_shape,) if isinstance(batch_shape, int) else tuple(batch_shape))
    return tuple(extra) + tuple(shape)


def normal_n(loc: Any = 0.0, scale: Any = 1.0, batch_shape: Any = None, dtype: Any = None,
             ctx: Any = None) -> NDArray:
    """Gaussian draws shaped ``batch_shape + broadcast(loc, scale).shape``."""
    params = [_host(loc), _host(scale)]
    shape = _batch_shape(params, batch_shape)
    return _array(_random.generator().normal(params[0], params[1], shape), dtype, ctx)


def uniform_n(low: Any = 0.0, high: Any = 1.0, batch_shape: Any = None, dtype: Any = None,
              ctx: Any = None) -> NDArray:
    """Uniform draws shaped ``batch_shape + broadcast(low, high).shape``."""
    params = [_host(low), _host(high)]
    shape = _batch_shape(params, batch_shape)
    return _array(_random.generator().uniform(params[0], params[1], shape), dtype, ctx)


__all__ = ["bernoulli", "normal_n", "seed", "uniform_n"]
