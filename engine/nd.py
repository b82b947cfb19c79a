"""Alias module so ``from engine import nd`` and ``import engine.nd`` both work."""

from .ndarray import *  # noqa: F403
from .ndarray import random  # noqa: F401
