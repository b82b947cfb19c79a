"""Alias module so ``from engine import nd`` and ``import engine.nd`` both work."""

from .ndarray import *  # noqa: F403
from .ndarray import __all__ as _ndarray_all
from .ndarray import random  # noqa: F401

__all__ = list(_ndarray_all)
