"""Private NDArray helpers for symbol operators, where ``engine.nd`` has no function with
MXNet's signature yet. ``ADAPTERS`` take precedence over ``engine.nd`` (signatures that
differ from MXNet's); ``FUNCTIONS`` serve names ``engine.nd`` lacks."""

from __future__ import annotations

from typing import Any

from ..ndarray import NDArray
from .fallback_extra import EXTRA
from .fallback_linalg import LINALG
from .fallback_math import MATH
from .fallback_shape import SHAPE


def _transpose(data: NDArray, axes: Any = ()) -> NDArray:
    return data.transpose(*axes) if axes else data.transpose()


ADAPTERS: dict[str, Any] = {"transpose": _transpose}
def _shuffle(data: NDArray) -> NDArray:
    from ..ndarray.random import shuffle

    return shuffle(data)


FUNCTIONS: dict[str, Any] = {**MATH, **SHAPE, **EXTRA, **LINALG, "shuffle": _shuffle}
