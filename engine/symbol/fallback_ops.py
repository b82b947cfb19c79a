"""Private NDArray helpers for symbol operators, where ``engine.nd`` has no function with
MXNet's signature yet. ``ADAPTERS`` take precedence over ``engine.nd`` (signatures that
differ from MXNet's); ``FUNCTIONS`` serve names ``engine.nd`` lacks."""

from __future__ import annotations

from typing import Any

from ..ndarray import NDArray


def _transpose(data: NDArray, axes: Any = ()) -> NDArray:
    return data.transpose(*axes) if axes else data.transpose()


ADAPTERS: dict[str, Any] = {"transpose": _transpose}
FUNCTIONS: dict[str, Any] = {}
