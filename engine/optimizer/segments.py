"""How an update rule sees "one parameter" vs "many parameters packed in one flat buffer".

Every built-in rule runs on raw arrays. Coefficients that depend on the parameter (lr, wd,
the step count t, per-parameter norms) are either Python floats (one parameter, or all
parameters agree) or numpy vectors with one entry per parameter. ``expand`` turns such a
coefficient into something that broadcasts against the raw array: a Python float stays a
float (numpy treats it as a weak scalar, so float32 math stays float32), a vector becomes a
per-element array in the weights' dtype. ``sum`` reduces an elementwise array per parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy


def scalar_or_vector(values: list[float]) -> Any:
    """A Python float when all parameters share the value, else a float64 numpy vector."""
    first = values[0]
    if values.count(first) == len(values):
        return float(first)
    return numpy.asarray(values, dtype=numpy.float64)


@dataclass(frozen=True, slots=True)
class WholeArray:
    """One parameter: coefficients are scalars and reductions cover the whole array.

    ``index`` is the parameter's optimizer index; -1 when the rule runs outside any
    optimizer's parameter list (the ``nd.*_update`` operators).
    """

    index: int = -1

    @property
    def indices(self) -> tuple[int, ...]:
        return (self.index,)

    def expand(self, coef: Any, like: Any = None) -> Any:
        return float(coef)

    def sum(self, values: Any) -> Any:
        return float(values.sum())


WHOLE = WholeArray()


class Segments:
    """Parameters ``indices`` of sizes ``sizes`` laid end to end in one flat buffer."""

    __slots__ = ("indices", "sizes", "bounds")

    def __init__(self, sizes: list[int], indices: list[int]) -> None:
        if len(sizes) != len(indices):
            raise ValueError(f"{len(sizes)} sizes for {len(indices)} parameter indices")
        self.indices: tuple[int, ...] = tuple(indices)
        self.sizes = numpy.asarray(sizes, dtype=numpy.int64)
        ends = numpy.cumsum(self.sizes)
        self.bounds: list[tuple[int, int]] = list(
            zip((ends - self.sizes).tolist(), ends.tolist(), strict=True))

    def expand(self, coef: Any, like: Any) -> Any:
        if numpy.ndim(coef) == 0:
            return float(coef)
        coef = numpy.asarray(coef, dtype=numpy.float64)
        if bool((coef == coef[0]).all()):
            return float(coef[0])
        xp = numpy if isinstance(like, numpy.ndarray) else _module_of(like)
        per_element = numpy.repeat(coef, self.sizes).astype(like.dtype)
        return per_element if xp is numpy else xp.asarray(per_element)

    def sum(self, values: Any) -> Any:
        # A loop of per-slice sums gives bit-identical results to the one-parameter path
        # (numpy's pairwise summation over the same slice) and works on cupy too.
        return numpy.asarray([float(values[a:b].sum()) for a, b in self.bounds])


def _module_of(raw: Any) -> Any:
    from ..backend import array_module

    return array_module(raw)
