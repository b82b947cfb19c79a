"""The values an operator attribute may take: each domain turns an attribute's parsed
literal (``ast.literal_eval`` of MXNet's string) into the value the operator uses, or
raises ValueError saying what was expected.

>>> choice("relu", "tanh")("relu")
'relu'
>>> integer(low=1)(0)
Traceback (most recent call last):
...
ValueError: expected an integer >= 1, got 0
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy

Domain = Callable[[Any], Any]

# The dtypes an operator may be asked to produce (MXNet's type flags by name).
DTYPES = ("float16", "float32", "float64", "uint8", "int8", "int32", "int64", "bool")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, numpy.integer)) and not isinstance(value, bool)


def integer(low: int | None = None, high: int | None = None) -> Domain:
    def check(value: Any) -> int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not _is_int(value) or (low is not None and value < low) or (
                high is not None and value > high):
            bounds = "" if low is None and high is None else \
                f" >= {low}" if high is None else f" in [{low}, {high}]"
            raise ValueError(f"expected an integer{bounds}, got {_show(value)}")
        return int(value)
    return check


def real(low: float | None = None) -> Domain:
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float, numpy.number)) \
                or not math.isfinite(float(value)) or (low is not None and value < low):
            bound = "" if low is None else f" >= {low}"
            raise ValueError(f"expected a finite number{bound}, got {_show(value)}")
        return float(value)
    return check


def boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if _is_int(value) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    raise ValueError(f"expected a boolean, got {_show(value)}")


def choice(*names: Any) -> Domain:
    def check(value: Any) -> Any:
        if value not in names or isinstance(value, bool) != isinstance(names[0], bool):
            raise ValueError(f"expected one of {list(names)}, got {_show(value)}")
        return value
    return check


def ints(low: int | None = None) -> Domain:
    """An int or a sequence of ints (a shape, axes, widths) -> a tuple."""
    one = integer(low)

    def check(value: Any) -> tuple[int, ...]:
        items = value if isinstance(value, (tuple, list)) else (value,)
        try:
            return tuple(one(v) for v in items)
        except ValueError:
            bound = "" if low is None else f" >= {low}"
            raise ValueError(f"expected integers{bound}, got {_show(value)}") from None
    return check


def optional(domain: Domain) -> Domain:
    """``None`` (MXNet writes ``"None"``) or a value of ``domain``."""
    def check(value: Any) -> Any:
        return None if value is None or value == "None" else domain(value)
    return check


def slice_bounds(value: Any) -> tuple[int | None, ...]:
    """``begin``/``end``/``step`` of ``slice``: ints or None per axis."""
    items = value if isinstance(value, (tuple, list)) else (value,)
    out = []
    for item in items:
        if item is None or item == "None":
            out.append(None)
        elif _is_int(item):
            out.append(int(item))
        else:
            raise ValueError(f"expected integers or None per axis, got {_show(value)}")
    return tuple(out)


def dtype(value: Any) -> str:
    name = str(value)
    try:
        resolved = numpy.dtype(name).name
    except TypeError:
        resolved = ""
    if resolved not in DTYPES:
        raise ValueError(f"expected a dtype among {list(DTYPES)}, got {_show(value)}")
    return name


def text(value: Any) -> Any:
    """Accepted as given (``ctx``: where to allocate, irrelevant to shapes)."""
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {_show(value)}")
    return value


INT = integer()
AXIS = integer()
OPT_AXIS = optional(integer())
AXES = optional(ints())
REAL = real()
OPT_REAL = optional(real())
BOOL = boolean
SHAPE = ints(low=0)
DTYPE = dtype
OPT_DTYPE = optional(dtype)
