"""Shape functions of the operators served by their NDArray function (:mod:`..generic`):
each computes an operator's output shapes from its input shapes and attributes, with no
array allocated, and declares the attributes it accepts with their domains.

A user's graph can ask ``arange`` for 10**12 values or chain ``sin`` over a 1x8192x8192
input 100,000 times; inferring shapes by running the operator (the old way, still the
fallback for an operator without a rule, in a trusted notebook) would allocate all of it.
With a rule, inference costs microseconds per node whatever the sizes, and the sizes can
be refused before anything runs (:func:`..validation.inspect_symbol`). The rules are
grouped by family: :mod:`.elementwise`, :mod:`.reductions`, :mod:`.layout`,
:mod:`.indexing`, :mod:`.creation`, :mod:`.spatial`, :mod:`.linalg`. A test runs every
rule against its operator on small arrays.

>>> rule_for("sum").infer({"axis": 1}, [(2, 3, 4)])
(2, 4)
>>> rule_for("arange").infer({"start": 0, "stop": 10**12}, [])
(1000000000000,)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .domains import Domain

Shape = tuple[int, ...]
Infer = Callable[[dict[str, Any], list[Shape]], Shape | list[Shape]]


@dataclass(frozen=True)
class ShapeRule:
    """``infer(params, input_shapes)`` -> the output shape (or one per output).

    ``attrs``: every attribute the operator accepts, with its domain; ``required``: those
    without a default; ``inputs``: the least and most number of inputs (None: any)."""

    infer: Infer
    attrs: Mapping[str, Domain] = field(default_factory=dict)
    required: frozenset[str] = frozenset()
    inputs: tuple[int, int | None] = (1, 1)

    def validate(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` with each declared attribute checked against its domain (values of
        undeclared ones are left to the operator)."""
        missing = sorted(self.required - set(params))
        if missing:
            raise ValueError(f"required attribute {missing[0]!r} is missing")
        out = dict(params)
        for key, value in params.items():
            domain = self.attrs.get(key)
            if domain is not None:
                try:
                    out[key] = domain(value)
                except ValueError as exc:
                    raise ValueError(f"attribute {key!r}: {exc}") from None
        return out

    def check_inputs(self, count: int) -> None:
        low, high = self.inputs
        if count < low or (high is not None and count > high):
            wanted = f"{low}" if low == high else f"at least {low}" if high is None \
                else f"{low} to {high}"
            raise ValueError(f"takes {wanted} input(s), the graph gives {count}")


RULES: dict[str, ShapeRule] = {}


def rule(*names: str, attrs: Mapping[str, Domain] | None = None, required: tuple[str, ...] = (),
         inputs: tuple[int, int | None] = (1, 1)) -> Callable[[Infer], Infer]:
    """Register ``infer`` as the shape rule of the operators ``names`` (their engine.nd
    names; MXNet's other names reach them through ``generic.ND_NAME``)."""
    def register(infer: Infer) -> Infer:
        for name in names:
            if name in RULES:
                raise ValueError(f"two shape rules for {name!r}")
            RULES[name] = ShapeRule(infer, dict(attrs or {}), frozenset(required), inputs)
        return infer
    return register


def rule_for(op: str) -> ShapeRule | None:
    """The shape rule of a graph operator (by MXNet's name or engine.nd's), or None."""
    from ..generic import ND_NAME

    return RULES.get(op) or RULES.get(ND_NAME.get(op, op))


def normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"{what} {axis} is out of range for {ndim} dimensions")
    return axis % ndim


def prod(shape: Any) -> int:
    out = 1
    for d in shape:
        out *= int(d)
    return out


# Importing the families registers their rules.
from . import creation, elementwise, indexing, layout, linalg, reductions, spatial  # noqa: E402, F401
