"""Elementwise and reduction operators of ``mx.sym`` that ``engine.nd`` lacks, as private
NDArray helpers with MXNet's signatures and gradients (one code path for numpy and cupy).

>>> from engine import nd
>>> MATH['arcsin'](nd.array([0.0, 1.0])).asnumpy().tolist()
[0.0, 1.5707963705062866]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy

from ..backend import array_module
from ..ndarray import NDArray, apply_op
from ..ndarray.ndarray import as_raw, unbroadcast
from ..ndarray.nn_ops import erf

Raw = Any

_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012,
            9.9843695780195716e-6, 1.5056327351493116e-7)


def _gammaln(x: Raw) -> Raw:
    """log|Gamma(x)| (Lanczos, g=7), with the reflection formula below 0.5."""
    xp = array_module(x)
    x64 = x.astype(numpy.float64)
    small = x64 < 0.5
    z = xp.where(small, 1.0 - x64, x64) - 1.0
    series = xp.full(z.shape, _LANCZOS[0])
    for i, coef in enumerate(_LANCZOS[1:], start=1):
        series = series + coef / (z + i)
    t = z + 7.5
    value = 0.5 * math.log(2 * math.pi) + (z + 0.5) * xp.log(t) - t + xp.log(series)
    reflected = math.log(math.pi) - xp.log(abs(xp.sin(math.pi * x64))) - value
    return xp.where(small, reflected, value)


def _digamma(x: Raw) -> Raw:
    """psi(x) by recurrence up to x >= 6 and the asymptotic series (x > 0)."""
    xp = array_module(x)
    x = x.astype(numpy.float64)
    acc = xp.zeros_like(x)
    for _ in range(6):
        low = x < 6
        acc = acc - xp.where(low, 1.0 / x, 0.0)
        x = xp.where(low, x + 1, x)
    inv = 1.0 / (x * x)
    return acc + xp.log(x) - 0.5 / x - inv * (1 / 12 - inv * (1 / 120 - inv / 252))


def _gamma(x: Raw) -> Raw:
    xp = array_module(x)
    sign = xp.where((x > 0) | (xp.floor(x) % 2 == 1), 1.0, -1.0)
    return sign * xp.exp(_gammaln(x))


def _erfinv(y: Raw) -> Raw:
    """Inverse error function: Giles' approximation refined by two Newton steps."""
    xp = array_module(y)
    y64 = y.astype(numpy.float64)
    w = -xp.log(xp.maximum((1.0 - y64) * (1.0 + y64), 1e-300))
    central = w < 5.0
    wc = w - 2.5
    pc = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941):
        pc = c + pc * wc
    wt = xp.sqrt(xp.maximum(w, 5.0)) - 3.0
    pt = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682):
        pt = c + pt * wt
    x = xp.where(central, pc, pt) * y64
    for _ in range(2):
        x = x - (erf(x) - y64) / (2 / math.sqrt(math.pi) * xp.exp(-x * x))
    return xp.where(abs(y64) >= 1, xp.where(y64 > 0, xp.inf, -xp.inf), x)


# name -> (forward(x), derivative(x, out)); the gradient is g * derivative
_UNARY: dict[str, tuple[Callable[[Raw], Raw], Callable[[Raw, Raw], Raw] | None]] = {
    "arcsin": (lambda x: array_module(x).arcsin(x),
               lambda x, o: 1 / array_module(x).sqrt(1 - x * x)),
    "arccos": (lambda x: array_module(x).arccos(x),
               lambda x, o: -1 / array_module(x).sqrt(1 - x * x)),
    "arctan": (lambda x: array_module(x).arctan(x), lambda x, o: 1 / (1 + x * x)),
    "arcsinh": (lambda x: array_module(x).arcsinh(x),
                lambda x, o: 1 / array_module(x).sqrt(x * x + 1)),
    "arccosh": (lambda x: array_module(x).arccosh(x),
                lambda x, o: 1 / array_module(x).sqrt(x * x - 1)),
    "arctanh": (lambda x: array_module(x).arctanh(x), lambda x, o: 1 / (1 - x * x)),
    "sinh": (lambda x: array_module(x).sinh(x), lambda x, o: array_module(x).cosh(x)),
    "cosh": (lambda x: array_module(x).cosh(x), lambda x, o: array_module(x).sinh(x)),
    "tan": (lambda x: array_module(x).tan(x), lambda x, o: 1 + o * o),
    "log2": (lambda x: array_module(x).log2(x), lambda x, o: 1 / (x * math.log(2))),
    "log10": (lambda x: array_module(x).log10(x), lambda x, o: 1 / (x * math.log(10))),
    "cbrt": (lambda x: array_module(x).cbrt(x), lambda x, o: 1 / (3 * o * o)),
    "rcbrt": (lambda x: 1 / array_module(x).cbrt(x), lambda x, o: -o / (3 * x)),
    "degrees": (lambda x: x * (180 / math.pi), lambda x, o: 180 / math.pi + 0 * x),
    "radians": (lambda x: x * (math.pi / 180), lambda x, o: math.pi / 180 + 0 * x),
    "erf": (erf, lambda x, o: 2 / math.sqrt(math.pi) * array_module(x).exp(-x * x)),
    "erfinv": (_erfinv, lambda x, o: math.sqrt(math.pi) / 2 * array_module(x).exp(o * o)),
    "gamma": (_gamma, lambda x, o: o * _digamma(x)),
    "gammaln": (_gammaln, lambda x, o: _digamma(x)),
    "fix": (lambda x: array_module(x).fix(x), None),
    "trunc": (lambda x: array_module(x).trunc(x), None),
    "rint": (lambda x: array_module(x).rint(x), None),
    "logical_not": (lambda x: (x == 0).astype(x.dtype), None),
    "identity": (lambda x: x.copy(), lambda x, o: 1 + 0 * x),
}


def _unary(name: str) -> Callable[..., NDArray]:
    forward, derivative = _UNARY[name]

    def op(data: NDArray) -> NDArray:
        x = data.raw
        with numpy.errstate(all="ignore"):  # inf/nan outside the domain, as MXNet gives
            out = forward(x).astype(x.dtype, copy=False)
        if derivative is None:
            return apply_op(out, (data,), lambda g: (g * 0,))

        def backward(g: Raw) -> tuple[Raw]:
            with numpy.errstate(all="ignore"):
                return ((g * derivative(x, out)).astype(x.dtype, copy=False),)

        return apply_op(out, (data,), backward)

    op.__name__ = name
    op.__doc__ = f"MXNet's elementwise ``{name}``."
    return op


def hard_sigmoid(data: NDArray, alpha: float = 0.2, beta: float = 0.5) -> NDArray:
    x = data.raw
    xp = data.xp
    out = xp.clip(alpha * x + beta, 0, 1).astype(x.dtype, copy=False)
    inside = (alpha * x + beta > 0) & (alpha * x + beta < 1)
    return apply_op(out, (data,), lambda g: (g * alpha * inside,))


def softmin(data: NDArray, axis: int = -1, temperature: float | None = None,
            dtype: Any = None, use_length: bool = False) -> NDArray:
    from ..ndarray.nn_ops import softmax

    return softmax(-data, axis=axis, temperature=temperature)


def make_loss(data: NDArray, grad_scale: float = 1.0, valid_thresh: float = 0.0,
              normalization: str = "null") -> NDArray:
    """Identity forward; backward ``grad_scale`` (normalized by the batch or the count of
    values above ``valid_thresh``), whatever the head gradient, as MXNet's ``MakeLoss``."""
    x = data.raw
    xp = data.xp

    def backward(g: Raw) -> tuple[Raw]:
        scale = grad_scale
        if normalization == "batch":
            scale = scale / x.shape[0]
        elif normalization == "valid":
            scale = scale / max(int((x > valid_thresh).sum()), 1)
        return (xp.full(x.shape, scale, dtype=x.dtype),)

    return apply_op(x.copy(), (data,), backward)


# broadcast binary ops: name -> (forward(a, b), gradients(g, a, b, out) or None)
_BINARY: dict[str, tuple[Callable[[Raw, Raw], Raw], Any]] = {
    "broadcast_equal": (lambda a, b: a == b, None),
    "broadcast_not_equal": (lambda a, b: a != b, None),
    "broadcast_greater": (lambda a, b: a > b, None),
    "broadcast_greater_equal": (lambda a, b: a >= b, None),
    "broadcast_lesser": (lambda a, b: a < b, None),
    "broadcast_lesser_equal": (lambda a, b: a <= b, None),
    "broadcast_logical_and": (lambda a, b: (a != 0) & (b != 0), None),
    "broadcast_logical_or": (lambda a, b: (a != 0) | (b != 0), None),
    "broadcast_logical_xor": (lambda a, b: (a != 0) ^ (b != 0), None),
    # Python's sign rule (the result takes the divisor's sign), as MXNet's mod
    "broadcast_mod": (lambda a, b: array_module(a).where(b == 0, 0, array_module(a).mod(a, b)),
                      lambda g, a, b, o: (g, -g * array_module(a).floor(a / b))),
    "broadcast_hypot": (lambda a, b: array_module(a).hypot(a, b),
                        lambda g, a, b, o: (g * a / o, g * b / o)),
}


def _binary(name: str) -> Callable[..., NDArray]:
    forward, gradients = _BINARY[name]

    def op(lhs: NDArray, rhs: Any) -> NDArray:
        a = lhs.raw
        b = as_raw(rhs, lhs)
        with numpy.errstate(all="ignore"):
            out = forward(a, b).astype(a.dtype, copy=False)
        inputs = (lhs, rhs) if isinstance(rhs, NDArray) else (lhs,)

        def backward(g: Raw) -> tuple[Raw, ...]:
            with numpy.errstate(all="ignore"):
                grads = (g * 0, g * 0) if gradients is None else gradients(g, a, b, out)
            return tuple(unbroadcast(gr * (a * 0 + 1), arr.shape)
                         for gr, arr in zip(grads, inputs, strict=False))

        return apply_op(out, inputs, backward)

    op.__name__ = name
    return op


def _nan_reduce(kind: str) -> Callable[..., NDArray]:
    def op(data: NDArray, axis: Any = None, keepdims: bool = False,
           exclude: bool = False) -> NDArray:
        x = data.raw
        xp = data.xp
        axes = _axes(axis, x.ndim, exclude)
        if kind == "sum":
            out = xp.nansum(x, axis=axes, keepdims=keepdims)
            return apply_op(out.astype(x.dtype), (data,), lambda g: (
                _expand(g, x.shape, axes, keepdims) * ~xp.isnan(x),))
        out = xp.nanprod(x, axis=axes, keepdims=keepdims)
        clean = xp.where(xp.isnan(x), 1, x)
        return apply_op(out.astype(x.dtype), (data,), lambda g: (
            _expand(g * out, x.shape, axes, keepdims) / clean * ~xp.isnan(x),))

    op.__name__ = f"nan{kind}"
    return op


def _axes(axis: Any, ndim: int, exclude: bool = False) -> tuple[int, ...] | None:
    if axis is None or axis == ():
        return None if not exclude else ()
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(a % ndim for a in axes)
    return tuple(i for i in range(ndim) if i not in axes) if exclude else axes


def _expand(g: Raw, shape: tuple[int, ...], axes: tuple[int, ...] | None,
            keepdims: bool) -> Raw:
    xp = array_module(g)
    if not keepdims:
        for ax in sorted(range(len(shape)) if axes is None else axes):
            g = xp.expand_dims(g, ax)
    return xp.broadcast_to(g, shape)


def moments(data: NDArray, axes: Any = None, keepdims: bool = False) -> list[NDArray]:
    """Mean and variance over ``axes`` (two outputs)."""
    from ..ndarray.ops import reduce_mean

    mean = reduce_mean(data, axis=axes, keepdims=True)
    var = reduce_mean((data - mean) * (data - mean), axis=axes, keepdims=keepdims)
    if not keepdims:
        mean = reduce_mean(data, axis=axes, keepdims=False)
    return [mean, var]


def argmax_channel(data: NDArray) -> NDArray:
    """Indices of the maximum over the channel axis (axis 1), as floats."""
    x = data.raw
    out = x.argmax(axis=1).astype(x.dtype)
    return NDArray(out, data._ctx)


def add_n(*args: NDArray) -> NDArray:
    """The elementwise sum of the inputs (MXNet's ``add_n`` / ``ElementWiseSum``)."""
    total = args[0]
    for arr in args[1:]:
        total = total + arr
    return total


def smooth_l1(data: NDArray, scalar: float = 1.0) -> NDArray:
    x = data.raw
    xp = data.xp
    s2 = scalar * scalar
    small = abs(x) < 1.0 / s2
    out = xp.where(small, 0.5 * s2 * x * x, abs(x) - 0.5 / s2).astype(x.dtype, copy=False)
    return apply_op(out, (data,), lambda g: (g * xp.where(small, s2 * x, xp.sign(x)),))


def l2_normalization(data: NDArray, eps: float = 1e-10, mode: str = "instance") -> NDArray:
    """MXNet's ``L2Normalization``: divide by the L2 norm per instance, channel or
    spatial position."""
    from ..ndarray.ops import reduce_sum

    axes = {"instance": tuple(range(1, data.ndim)), "channel": (1,),
            "spatial": tuple(range(2, data.ndim))}[mode]
    norm = (reduce_sum(data * data, axis=axes, keepdims=True) + eps).sqrt()
    return data / norm


def softmax_activation(data: NDArray, mode: str = "instance") -> NDArray:
    from ..ndarray.nn_ops import softmax

    if mode == "channel":
        return softmax(data, axis=1)
    return softmax(data.reshape((data.shape[0], -1))).reshape(data.shape)


MATH: dict[str, Any] = {name: _unary(name) for name in _UNARY}
MATH.update({name: _binary(name) for name in _BINARY})
MATH.update({
    "hypot": _binary("broadcast_hypot"),
    "hard_sigmoid": hard_sigmoid, "softmin": softmin, "make_loss": make_loss,
    "MakeLoss": make_loss, "nansum": _nan_reduce("sum"), "nanprod": _nan_reduce("prod"),
    "moments": moments, "argmax_channel": argmax_channel, "add_n": add_n,
    "ElementWiseSum": add_n, "smooth_l1": smooth_l1, "L2Normalization": l2_normalization,
    "SoftmaxActivation": softmax_activation,
})
