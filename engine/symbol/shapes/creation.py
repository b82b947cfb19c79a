"""Operators that create arrays from attributes alone (or draw per element of their
inputs): zeros/ones/full, arange, eye, linspace and the random samplers. Their size is
whatever the attributes say, which is why a graph's ``arange(0, 1e12)`` must be sized
from its attributes and refused, never run."""

from __future__ import annotations

import math
from typing import Any

from . import Shape, rule
from .domains import BOOL, INT, OPT_DTYPE, OPT_REAL, REAL, SHAPE, integer, optional, text

PLACE = {"ctx": text, "dtype": OPT_DTYPE}
OPT_SHAPE = optional(SHAPE)


def _as_shape(shape: int | tuple[int, ...]) -> Shape:
    return (shape,) if isinstance(shape, int) else tuple(shape)


@rule("zeros", "ones", attrs={"shape": SHAPE, **PLACE}, required=("shape",), inputs=(0, 0))
def _filled(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    return _as_shape(p["shape"])


rule("full", attrs={"shape": SHAPE, "val": REAL, **PLACE}, required=("shape", "val"),
     inputs=(0, 0))(_filled)


@rule("arange", attrs={"start": REAL, "stop": OPT_REAL, "step": REAL,
                       "repeat": integer(low=1), **PLACE}, required=("start",), inputs=(0, 0))
def _arange(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    start, stop, step = p["start"], p.get("stop"), p.get("step", 1.0)
    if stop is None:  # arange(n) counts from 0
        start, stop = 0.0, start
    if step == 0:
        raise ValueError("step cannot be 0")
    count = max(0, math.ceil((stop - start) / step))
    repeat = p.get("repeat", 1)
    return (count * repeat if repeat > 1 else count,)


@rule("eye", attrs={"N": integer(low=0), "M": integer(low=0), "k": INT, **PLACE},
      required=("N",), inputs=(0, 0))
def _eye(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    return (p["N"], p.get("M") or p["N"])


@rule("linspace", attrs={"start": REAL, "stop": REAL, "num": integer(low=0),
                         "endpoint": BOOL, **PLACE}, required=("start", "stop", "num"),
      inputs=(0, 0))
def _linspace(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    return (p["num"],)


def _draws(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    """No inputs: ``shape`` draws ((1,) when it is not given); with parameter arrays as
    inputs, ``shape`` draws for each of their elements (MXNet's ``sample_*``)."""
    shape = p.get("shape")
    per = () if shape is None and shapes else (1,) if shape is None else _as_shape(shape)
    if not shapes:
        return per
    if any(s != shapes[0] for s in shapes):
        raise ValueError(f"the parameter arrays must have one shape, got {shapes}")
    return shapes[0] + per


SAMPLERS = {
    ("uniform", "random_uniform", "sample_uniform"): ("low", "high"),
    ("normal", "random_normal", "sample_normal"): ("loc", "scale"),
    ("random_exponential", "sample_exponential"): ("scale",),
    ("random_gamma", "sample_gamma"): ("alpha", "beta"),
    ("random_poisson", "sample_poisson"): ("lam",),
    ("random_negative_binomial", "sample_negative_binomial"): ("k", "p"),
    ("random_generalized_negative_binomial", "sample_generalized_negative_binomial"):
        ("mu", "alpha"),
}
for _names, _params in SAMPLERS.items():
    rule(*_names, attrs={"shape": OPT_SHAPE, **PLACE, **dict.fromkeys(_params, REAL)},
         inputs=(0, len(_params)))(_draws)
rule("random_randint", attrs={"low": INT, "high": INT, "shape": OPT_SHAPE, **PLACE},
     required=("low", "high"), inputs=(0, 0))(_draws)
