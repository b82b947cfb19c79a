"""Random arrays (``nd.random.uniform``, ``normal``, ...), drawn from :mod:`engine.random`."""

from __future__ import annotations

from typing import Any

import numpy

from .. import random as _random
from ..context import Context, device_of
from .creation import DEFAULT_DTYPE, _shape
from .ndarray import NDArray, as_raw


def _draw(kind: str, shape: Any, ctx: Context | str | None, dtype: Any, *args: Any) -> NDArray:
    device = device_of(ctx)
    rng = _random.generator(device.xp)
    dt = numpy.dtype(dtype or DEFAULT_DTYPE)
    size = _shape(shape) or ((1,) if shape is None else ())
    if kind == "uniform":
        low, high = args
        data = rng.uniform(low, high, size)
    elif kind == "normal":
        loc, scale = args
        data = rng.normal(loc, scale, size)
    elif kind == "randint":
        low, high = args
        data = rng.integers(low, high, size)
    elif kind == "exponential":
        data = rng.exponential(args[0], size)
    elif kind == "gamma":
        data = rng.gamma(args[0], args[1], size)
    elif kind == "poisson":
        data = rng.poisson(args[0], size)
    else:  # pragma: no cover - internal
        raise ValueError(kind)
    return NDArray(device.xp.asarray(data).astype(dt, copy=False), device)


def uniform(low: float = 0.0, high: float = 1.0, shape: Any = None,
            ctx: Context | str | None = None, dtype: Any = None, **_: Any) -> NDArray:
    return _draw("uniform", shape, ctx, dtype, low, high)


def normal(loc: float = 0.0, scale: float = 1.0, shape: Any = None,
           ctx: Context | str | None = None, dtype: Any = None, **_: Any) -> NDArray:
    return _draw("normal", shape, ctx, dtype, loc, scale)


def randn(*shape: int, loc: float = 0.0, scale: float = 1.0, **kw: Any) -> NDArray:
    return normal(loc, scale, shape, **kw)


def randint(low: int, high: int, shape: Any = None, ctx: Context | str | None = None,
            dtype: Any = "int32", **_: Any) -> NDArray:
    return _draw("randint", shape, ctx, dtype, low, high)


def exponential(scale: float = 1.0, shape: Any = None, ctx: Any = None, dtype: Any = None,
                **_: Any) -> NDArray:
    return _draw("exponential", shape, ctx, dtype, scale)


def gamma(alpha: float = 1.0, beta: float = 1.0, shape: Any = None, ctx: Any = None,
          dtype: Any = None, **_: Any) -> NDArray:
    return _draw("gamma", shape, ctx, dtype, alpha, beta)


def poisson(lam: float = 1.0, shape: Any = None, ctx: Any = None, dtype: Any = None,
            **_: Any) -> NDArray:
    return _draw("poisson", shape, ctx, dtype, lam)


def shuffle(data: NDArray) -> NDArray:
    """A copy of ``data`` with its first axis shuffled."""
    rng = _random.generator(data.xp)
    perm = rng.permutation(data.shape[0])
    return NDArray(as_raw(data)[data.xp.asarray(perm)], data.context)
