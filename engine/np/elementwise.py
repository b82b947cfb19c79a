"""``mx.np``'s element-wise functions beyond the basic arithmetic: trigonometry, rounding,
comparisons (bool results, as mx.np's are), predicates and integer bit operations.

>>> from engine import np
>>> np.greater(np.array([1.0, 3.0]), 2).dtype.__name__, np.rad2deg(np.array([0.0])).shape
('bool', (1,))
"""

from __future__ import annotations

import math
from typing import Any

import numpy

from .. import ndarray as _nd
from ..ndarray.ndarray import NDArray, apply_op, numpy_shapes, unbroadcast, write_out
from ._wrap import as_array, numpy_values, zero_dim


def _unary(name: str) -> Any:
    fn = getattr(_nd, name)

    def op(x: Any, out: NDArray | None = None, **_: Any) -> NDArray:
        with numpy_shapes():
            result = fn(as_array(x))
        return write_out(result, out)

    op.__name__ = name
    op.__doc__ = f"Element-wise ``{name}`` (differentiable)."
    return op


arccos, arccosh, arcsin, arcsinh = (_unary(n) for n in ("arccos", "arccosh", "arcsin", "arcsinh"))
arctan, arctanh, cbrt, cosh = (_unary(n) for n in ("arctan", "arctanh", "cbrt", "cosh"))
sinh, tan, log10, log2 = (_unary(n) for n in ("sinh", "tan", "log10", "log2"))
degrees = rad2deg = _unary("degrees")
radians = deg2rad = _unary("radians")
fix, rint, trunc = _unary("fix"), _unary("rint"), _unary("trunc")
fabs = _unary("abs")


@zero_dim
def around(x: Any, decimals: int = 0, out: NDArray | None = None, **_: Any) -> NDArray:
    """Round half to even to ``decimals`` places (zero gradient), as numpy and mx.np do."""
    arr = as_array(x)
    result = apply_op(arr.xp.round(arr.raw, decimals), (arr,),
                      lambda g: (arr.xp.zeros_like(arr.raw),))
    return write_out(result, out)


round = round_ = around  # noqa: A001 - numpy's names


def _binary(forward: Any, grads: Any, name: str) -> Any:
    """A broadcasting binary function; ``grads(g, a, b, out)`` gives both raw gradients."""

    @zero_dim
    def op(x1: Any, x2: Any, out: NDArray | None = None, **_: Any) -> NDArray:
        like = x1 if isinstance(x1, NDArray) else x2 if isinstance(x2, NDArray) else None
        a, b = as_array(x1, like), as_array(x2, like)
        result_raw = forward(a.raw, b.raw)
        if result_raw.dtype.kind == "f" and a.raw.dtype.kind == "f":
            result_raw = result_raw.astype(a.raw.dtype, copy=False)

        def backward(g: Any) -> tuple[Any, Any]:
            ga, gb = grads(g, a.raw, b.raw, result_raw)
            return (unbroadcast(ga, a.shape).astype(a.dtype, copy=False),
                    unbroadcast(gb, b.shape).astype(b.dtype, copy=False))

        result = apply_op(result_raw, (a, b), backward)
        return write_out(result, out)

    op.__name__ = name
    return op


arctan2 = _binary(numpy.arctan2, lambda g, a, b, o: (g * b / (a * a + b * b),
                                                      -g * a / (a * a + b * b)), "arctan2")
hypot = _binary(numpy.hypot, lambda g, a, b, o: (g * a / o, g * b / o), "hypot")
copysign = _binary(numpy.copysign,
                   lambda g, a, b, o: (g * numpy.sign(a) * numpy.sign(o), 0 * g), "copysign")
ldexp = _binary(lambda a, b: a * 2.0 ** b,
                lambda g, a, b, o: (g * 2.0 ** b, g * o * math.log(2.0)), "ldexp")
mod = remainder = _binary(numpy.mod, lambda g, a, b, o: (g, -g * numpy.floor(a / b)), "mod")


def _values(name: str) -> Any:
    """A numpy function whose results carry no gradient (bool or integer results)."""
    fn = getattr(numpy, name)

    def op(*args: Any, out: NDArray | None = None, **kwargs: Any) -> Any:
        like = next((a for a in args if isinstance(a, NDArray)), None)
        arrays = [as_array(a, like) if isinstance(a, (list, tuple)) else a for a in args]
        result = numpy_values(fn)(*arrays, **kwargs)
        return write_out(result, out)

    op.__name__ = name
    op.__doc__ = f"``numpy.{name}`` (no gradient)."
    return zero_dim(op)


equal, not_equal, greater, greater_equal = (
    _values(n) for n in ("equal", "not_equal", "greater", "greater_equal"))
less, less_equal, logical_not = _values("less"), _values("less_equal"), _values("logical_not")
isfinite, isinf, isnan = _values("isfinite"), _values("isinf"), _values("isnan")
isneginf, isposinf = _values("isneginf"), _values("isposinf")
bitwise_and, bitwise_or, bitwise_xor = (
    _values(n) for n in ("bitwise_and", "bitwise_or", "bitwise_xor"))
bitwise_not = invert = _values("invert")
lcm = _values("lcm")


@zero_dim
def nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> NDArray:
    """NaN and infinities replaced by finite numbers (gradient 1 where ``x`` was finite)."""
    arr = as_array(x)
    xp = arr.xp
    out = xp.nan_to_num(arr.raw, copy=True, nan=nan, posinf=posinf, neginf=neginf)
    result = apply_op(out, (arr,), lambda g: (g * xp.isfinite(arr.raw),))
    if not copy:
        arr.raw[...] = out
        return arr
    return result


__all__ = [
    "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctan2", "arctanh", "around",
    "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "cbrt", "copysign", "cosh",
    "deg2rad", "degrees", "equal", "fabs", "fix", "greater", "greater_equal", "hypot",
    "invert", "isfinite", "isinf", "isnan", "isneginf", "isposinf", "lcm", "ldexp", "less",
    "less_equal", "log10", "log2", "logical_not", "mod", "nan_to_num", "not_equal", "rad2deg",
    "radians", "remainder", "rint", "round", "round_", "sinh", "tan", "trunc",
]
