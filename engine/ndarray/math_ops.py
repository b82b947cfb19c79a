"""MXNet's remaining elementwise math: trigonometry, rounding, special functions,
comparisons and logic (``broadcast_greater``, ``logical_and``, ...), and a few reductions
(``nansum``, ``moments``, ``cumsum``).

Differentiable unary rules join the table in :mod:`engine.ndarray.ops`, so each also
becomes an NDArray method (``x.arcsin()``).

>>> from engine import nd
>>> nd.broadcast_greater(nd.array([1, 5]), nd.array([3])).asnumpy().tolist()
[0.0, 1.0]
>>> nd.trunc(nd.array([-1.7, 1.7])).asnumpy().tolist()
[-1.0, 1.0]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy

from .. import backend
from .ndarray import NDArray, apply_op
from .ops import _UNARY, _axes, _expand_back, _raw_operand, _xp, binary, reduce_sum, unary


def _zero(g: Any, x: Any, o: Any) -> Any:
    return _xp(x).zeros_like(x)


def _host_map(fn: Callable[[float], float]) -> Callable[[Any], Any]:
    """Apply a scalar math function elementwise (special functions numpy lacks)."""
    vec = numpy.vectorize(fn, otypes=[numpy.float64])

    def apply(x: Any) -> Any:
        xp = _xp(x)
        return xp.asarray(vec(backend.to_numpy(x)).astype(x.dtype))

    return apply


def _erfinv_scalar(y: float) -> float:
    if y <= -1 or y >= 1:
        return math.copysign(math.inf, y) if abs(y) == 1 else math.nan
    x = 0.0  # Newton on erf(x) = y, from a good closed-form start
    a = 0.147
    ln = math.log(1 - y * y)
    t = 2 / (math.pi * a) + ln / 2
    x = math.copysign(math.sqrt(math.sqrt(t * t - ln / a) - t), y)
    for _ in range(3):
        x -= (math.erf(x) - y) / (2 / math.sqrt(math.pi) * math.exp(-x * x))
    return x


_erf = _host_map(math.erf)
_erfinv = _host_map(_erfinv_scalar)
_gamma = _host_map(lambda v: math.gamma(v) if v > 0 or v != math.floor(v) else math.nan)
_gammaln = _host_map(lambda v: math.lgamma(v) if v > 0 or v != math.floor(v) else math.inf)
_digamma = _host_map(lambda v: _digamma_scalar(v))


def _digamma_scalar(v: float) -> float:
    result = 0.0
    while v < 6:
        result -= 1 / v
        v += 1
    f = 1 / (v * v)
    return result + math.log(v) - 0.5 / v - f * (1 / 12 - f * (1 / 120 - f * (1 / 252)))


_UNARY.update({
    "arcsin": (lambda x: _xp(x).arcsin(x), lambda g, x, o: g / _xp(x).sqrt(1 - x * x)),
    "arccos": (lambda x: _xp(x).arccos(x), lambda g, x, o: -g / _xp(x).sqrt(1 - x * x)),
    "arctan": (lambda x: _xp(x).arctan(x), lambda g, x, o: g / (1 + x * x)),
    "arcsinh": (lambda x: _xp(x).arcsinh(x), lambda g, x, o: g / _xp(x).sqrt(x * x + 1)),
    "arccosh": (lambda x: _xp(x).arccosh(x), lambda g, x, o: g / _xp(x).sqrt(x * x - 1)),
    "arctanh": (lambda x: _xp(x).arctanh(x), lambda g, x, o: g / (1 - x * x)),
    "sinh": (lambda x: _xp(x).sinh(x), lambda g, x, o: g * _xp(x).cosh(x)),
    "cosh": (lambda x: _xp(x).cosh(x), lambda g, x, o: g * _xp(x).sinh(x)),
    "tan": (lambda x: _xp(x).tan(x), lambda g, x, o: g * (1 + o * o)),
    "degrees": (lambda x: _xp(x).degrees(x), lambda g, x, o: g * (180 / math.pi)),
    "radians": (lambda x: _xp(x).radians(x), lambda g, x, o: g * (math.pi / 180)),
    "log2": (lambda x: _xp(x).log2(x), lambda g, x, o: g / (x * math.log(2))),
    "log10": (lambda x: _xp(x).log10(x), lambda g, x, o: g / (x * math.log(10))),
    "cbrt": (lambda x: _xp(x).cbrt(x), lambda g, x, o: g / (3 * o * o)),
    "rcbrt": (lambda x: 1 / _xp(x).cbrt(x), lambda g, x, o: -g * o / (3 * x)),
    "trunc": (lambda x: _xp(x).trunc(x), _zero),
    # fix == trunc (round toward zero, same dtype); numpy 2.5 deprecates numpy.fix
    "fix": (lambda x: _xp(x).trunc(x), _zero),
    "rint": (lambda x: _round_half_down(x), _zero),
    "erf": (_erf, lambda g, x, o: g * 2 / math.sqrt(math.pi) * _xp(x).exp(-x * x)),
    "erfinv": (_erfinv, lambda g, x, o: g * math.sqrt(math.pi) / 2 * _xp(x).exp(o * o)),
    "gamma": (_gamma, lambda g, x, o: g * o * _digamma(x)),
    "gammaln": (_gammaln, lambda g, x, o: g * _digamma(x)),
    "identity": (lambda x: x.copy(), lambda g, x, o: g),
    "logical_not": (lambda x: (x == 0).astype(x.dtype), _zero),
})

_NEW_UNARY = (
    "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "sinh", "cosh", "tan",
    "degrees", "radians", "log2", "log10", "cbrt", "rcbrt", "trunc", "fix", "rint", "erf",
    "erfinv", "gamma", "gammaln", "identity", "logical_not",
)


def _round_half_down(x: Any) -> Any:
    """MXNet's ``rint``: the nearest integer, halves going down (``rint(1.5) == 1``,
    ``rint(-0.5) == -1``), unlike numpy's halves-to-even."""
    low = _xp(x).floor(x)
    return (low + (x - low > 0.5)).astype(x.dtype, copy=False)


def _unary_fn(name: str) -> Callable[..., NDArray]:
    def fn(data: NDArray, **_: Any) -> NDArray:
        return unary(name, data)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{name}`` (differentiable)."
    return fn


UNARY_FUNCTIONS = {name: _unary_fn(name) for name in _NEW_UNARY}


# ----------------------------------------------------- comparisons and logic


def _logical(kind: str) -> Callable[[Any, Any], Any]:
    def fn(a: Any, b: Any) -> Any:
        xp = _xp(a, b)
        return getattr(xp, kind)(xp.asarray(a) != 0, xp.asarray(b) != 0)

    return fn


_RELATIONS: dict[str, Callable[[Any, Any], Any]] = {
    "equal": lambda a, b: a == b,
    "not_equal": lambda a, b: a != b,
    "greater": lambda a, b: a > b,
    "greater_equal": lambda a, b: a >= b,
    "lesser": lambda a, b: a < b,
    "lesser_equal": lambda a, b: a <= b,
    "logical_and": _logical("logical_and"),
    "logical_or": _logical("logical_or"),
    "logical_xor": _logical("logical_xor"),
}


def _arrays(*operands: Any) -> tuple[NDArray, ...]:
    return tuple(x for x in operands if isinstance(x, NDArray))


def _zero_gradients(*inputs: NDArray) -> Any:
    """MXNet differentiates comparisons as constants: ``(x > 0).backward()`` works and
    writes zeros, rather than failing as an unrecorded array would."""
    return lambda g: tuple(_xp(g).zeros(x.shape, x._data.dtype) for x in inputs)


def relation(kind: str, lhs: Any, rhs: Any) -> Any:
    """A 0/1 array in the operands' dtype (MXNet's comparison ops are not boolean)."""
    if not isinstance(lhs, NDArray) and not isinstance(rhs, NDArray):
        return float(_RELATIONS[kind](lhs, rhs))
    like = lhs if isinstance(lhs, NDArray) else rhs
    a, b = _raw_operand(lhs, like), _raw_operand(rhs, like)
    out = like.xp.asarray(_RELATIONS[kind](a, b)).astype(like._data.dtype)
    inputs = _arrays(lhs, rhs)
    return apply_op(out, inputs, _zero_gradients(*inputs))


def _relation_fn(kind: str) -> Callable[..., Any]:
    def fn(lhs: Any, rhs: Any, **_: Any) -> Any:
        return relation(kind, lhs, rhs)

    fn.__name__ = kind
    fn.__doc__ = f"Elementwise ``{kind}`` with broadcasting, as 0/1 in the operands' dtype."
    return fn


RELATION_FUNCTIONS = {name: _relation_fn(name) for name in _RELATIONS}


def modulo(lhs: Any, rhs: Any, **_: Any) -> Any:
    """``lhs % rhs`` with the divisor's sign and 0 where ``rhs == 0``, as MXNet.

    Differentiable as MXNet does it: d/dlhs = 1, d/drhs = -floor(lhs / rhs).

    >>> from engine import nd
    >>> nd.broadcast_mod(nd.array([5, -5, 3]), nd.array([3, 3, 0])).asnumpy().tolist()
    [2.0, 1.0, 0.0]
    """
    return binary("mod", lhs, rhs)


def hypot(lhs: Any, rhs: Any, **_: Any) -> Any:
    """``sqrt(lhs² + rhs²)`` with broadcasting; either side may be a scalar (differentiable)."""
    return binary("hypot", lhs, rhs)


def true_divide(lhs: Any, rhs: Any, **_: Any) -> Any:
    return binary("div", lhs, rhs)


# ----------------------------------------------------------------- reductions


def nansum(data: NDArray, axis: Any = None, keepdims: bool = False, exclude: bool = False,
           **_: Any) -> NDArray:
    """Sum treating NaN as zero; the gradient is 1 where the input is a number."""
    x = data._data
    axes = _axes(axis, data.ndim, exclude)
    xp = data.xp
    out = xp.asarray(xp.nansum(x, axis=axes, keepdims=keepdims)).astype(x.dtype)
    shape = data.shape
    return apply_op(out, (data,), lambda g: (
        xp.broadcast_to(_expand_back(g, shape, axes), shape) * ~xp.isnan(x),))


def nanprod(data: NDArray, axis: Any = None, keepdims: bool = False, exclude: bool = False,
            **_: Any) -> NDArray:
    """Product treating NaN as one."""
    x = data._data
    axes = _axes(axis, data.ndim, exclude)
    xp = data.xp
    out = xp.asarray(xp.nanprod(x, axis=axes, keepdims=keepdims)).astype(x.dtype)
    shape = data.shape
    return apply_op(out, (data,), lambda g: (
        xp.where(xp.isnan(x), 0, _expand_back(g * out, shape, axes) / x),))


def moments(data: NDArray, axes: Any = None, keepdims: bool = False, **_: Any) -> list[NDArray]:
    """``[mean, variance]`` over ``axes`` (differentiable)."""
    mean = data.mean(axis=axes, keepdims=True)
    var = unary("square", data - mean).mean(axis=axes, keepdims=keepdims)
    return [mean if keepdims else data.mean(axis=axes), var]


def cumsum(a: NDArray, axis: int | None = None, dtype: Any = None, **_: Any) -> NDArray:
    """Running sum along ``axis`` (the flattened array when None)."""
    xp = a.xp
    x = a._data if axis is not None else a._data.reshape(-1)
    ax = 0 if axis is None else axis
    out = xp.cumsum(x, axis=ax).astype(dtype or x.dtype)
    shape = a.shape
    return apply_op(out, (a,), lambda g: (
        xp.flip(xp.cumsum(xp.flip(g, ax), axis=ax), ax).reshape(shape),))


def sum_axis(data: NDArray, axis: Any = None, keepdims: bool = False, exclude: bool = False,
             **_: Any) -> NDArray:
    return reduce_sum(data, axis, keepdims, exclude)


def smooth_l1(data: NDArray, scalar: float = 1.0, **_: Any) -> NDArray:
    """Huber-like loss: ``0.5 (σx)²`` where ``|x| < 1/σ²``, else ``|x| - 0.5/σ²``."""
    x = data._data
    xp = data.xp
    s2 = scalar * scalar
    small = abs(x) < 1.0 / s2
    out = xp.where(small, 0.5 * s2 * x * x, abs(x) - 0.5 / s2).astype(x.dtype)
    return apply_op(out, (data,), lambda g: (g * xp.where(small, s2 * x, xp.sign(x)),))


def hard_sigmoid(data: NDArray, alpha: float = 0.2, beta: float = 0.5, **_: Any) -> NDArray:
    """``clip(alpha·x + beta, 0, 1)``."""
    x = data._data
    lin = alpha * x + beta
    inside = (lin > 0) & (lin < 1)
    out = data.xp.clip(lin, 0, 1).astype(x.dtype)
    return apply_op(out, (data,), lambda g: (g * alpha * inside,))


def softmin(data: NDArray, axis: int = -1, temperature: float | None = None, **kw: Any):
    """``softmax(-data)``."""
    from .nn_ops import softmax

    return softmax(-data, axis=axis, temperature=temperature)


def isnan(data: NDArray) -> NDArray:
    return NDArray(data.xp.isnan(data._data).astype(data._data.dtype), data._ctx)


def isinf(data: NDArray) -> NDArray:
    return NDArray(data.xp.isinf(data._data).astype(data._data.dtype), data._ctx)


def isfinite(data: NDArray) -> NDArray:
    return NDArray(data.xp.isfinite(data._data).astype(data._data.dtype), data._ctx)


def as_dtype(data: NDArray, dtype: Any, **_: Any) -> NDArray:
    """``Cast``/``cast``: a copy in ``dtype`` (gradient cast back)."""
    return data.astype(dtype)
