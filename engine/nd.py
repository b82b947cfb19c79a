"""Alias module so ``from engine import nd`` and ``import engine.nd`` both work."""

from typing import Any

from . import ndarray as _ndarray
from .ndarray import *  # noqa: F403
from .ndarray import __all__ as _ndarray_all
from .ndarray import random  # noqa: F401

__all__ = list(_ndarray_all)


def __getattr__(name: str) -> Any:
    return getattr(_ndarray, name)  # nd.np, nd.npx: namespaces loaded on first use
