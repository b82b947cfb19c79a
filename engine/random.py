"""The engine's random number state: one generator per backend, seeded together.

``seed(n)`` makes initializers, dropout, data shuffling and ``nd.random`` reproducible;
``get_state()``/``set_state()`` return and restore a JSON-serialisable snapshot so a
checkpointed job resumes with exactly the same random stream.

>>> import engine
>>> engine.random.seed(42)
>>> a = engine.nd.random.uniform(shape=(2,)); engine.random.seed(42)
>>> bool((engine.nd.random.uniform(shape=(2,)) == a).asnumpy().all())
True
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import numpy

from . import backend
from .base import integer_types  # noqa: F401 - MXNet exports it here

_numpy_rng = numpy.random.Generator(numpy.random.PCG64(0))
_cupy_rng: Any = None
_seed_value = 0


def seed(seed_state: int, ctx: Any = "all") -> None:
    """Seed every backend's generator (``ctx`` is accepted for MXNet compatibility).

    Any integer is a seed, negative ones included; as in MXNet (which passes it on as a C
    ``int``) only its low 32 bits count, so ``seed(-1)`` and ``seed(2**32 - 1)`` agree.
    """
    global _numpy_rng, _cupy_rng, _seed_value
    if not isinstance(seed_state, (int, numpy.integer)):
        raise ValueError(f"seed must be an integer, got {seed_state!r}")
    _seed_value = int(seed_state) & 0xFFFFFFFF
    _numpy_rng = numpy.random.Generator(numpy.random.PCG64(_seed_value))
    _cupy_rng = None


def generator(xp: ModuleType = numpy) -> Any:
    """The generator that draws numbers for arrays of module ``xp``."""
    global _cupy_rng
    if xp is numpy:
        return _numpy_rng
    if _cupy_rng is None:
        _cupy_rng = xp.random.default_rng(_seed_value)
    return _cupy_rng


def get_state() -> dict[str, Any]:
    """A JSON-serialisable snapshot of the cpu generator (and the seed of the gpu one)."""
    return {"seed": _seed_value, "numpy": _numpy_rng.bit_generator.state}


def set_state(state: dict[str, Any]) -> None:
    """Restore a snapshot taken by :func:`get_state`."""
    global _seed_value, _cupy_rng
    if not isinstance(state, dict) or "numpy" not in state:
        raise ValueError("not a random state produced by engine.random.get_state()")
    json.dumps(state)  # refuse anything that is not plain data
    _seed_value = int(state.get("seed", 0))
    _numpy_rng.bit_generator.state = state["numpy"]
    _cupy_rng = None if backend.cupy is None else _cupy_rng


# mx.random.uniform(...), mx.random.normal(...): MXNet exposes the array draws at this level
# too. They live in engine.ndarray.random, which imports this module, so they are looked up
# on first use instead of imported here.
_DRAWS = (
    "uniform", "normal", "randn", "randint", "exponential", "gamma", "poisson",
    "negative_binomial", "generalized_negative_binomial", "multinomial", "shuffle",
)


def __getattr__(name: str) -> Any:
    if name in _DRAWS:
        from .ndarray import random as draws

        return getattr(draws, name)
    raise AttributeError(f"module 'engine.random' has no attribute {name!r}")


__all__ = ["generator", "get_state", "seed", "set_state", *_DRAWS]
