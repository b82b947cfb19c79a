"""``engine.np.random``: numpy-style random arrays (``size=`` instead of ``shape=``)."""

from __future__ import annotations

from typing import Any

from .. import random as _random
from ..ndarray import NDArray
from ..ndarray import random as _ndr


def seed(seed: int) -> None:
    _random.seed(seed)


def uniform(low: float = 0.0, high: float = 1.0, size: Any = None, dtype: Any = None,
            ctx: Any = None, device: Any = None) -> NDArray:
    return _ndr.uniform(low, high, size, ctx=ctx or device, dtype=dtype)


def normal(loc: float = 0.0, scale: float = 1.0, size: Any = None, dtype: Any = None,
           ctx: Any = None, device: Any = None) -> NDArray:
    return _ndr.normal(loc, scale, size, ctx=ctx or device, dtype=dtype)


def randn(*size: int, dtype: Any = None, ctx: Any = None) -> NDArray:
    return _ndr.normal(0.0, 1.0, size, ctx=ctx, dtype=dtype)


def rand(*size: int, dtype: Any = None, ctx: Any = None) -> NDArray:
    return _ndr.uniform(0.0, 1.0, size, ctx=ctx, dtype=dtype)


def randint(low: int, high: int | None = None, size: Any = None, dtype: Any = "int64",
            ctx: Any = None) -> NDArray:
    if high is None:
        low, high = 0, low
    return _ndr.randint(low, high, size, ctx=ctx, dtype=dtype)


def shuffle(x: NDArray) -> None:
    """Shuffle ``x`` along its first axis, in place (as numpy does)."""
    x[:] = _ndr.shuffle(x)
