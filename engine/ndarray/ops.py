"""Differentiable array operations and their backward rules, side by side.

Each primitive computes on raw arrays (``x._data``) with the array's own module (numpy or
cupy) and hands :func:`apply_op` a rule for its gradient. Derived operations are built
from these primitives. The NDArray operators (``+``, ``*``, ``[]``, ...) are attached at
the bottom of this file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy

from ..base import MXNetShapeError
from ..util import is_np_array
from .inplace import check_inplace_write
from .ndarray import (
    NDArray,
    apply_op,
    as_raw,
    legacy_shape,
    needs_grad,
    shape_rules,
    unbroadcast,
)
from .shape_ops import (
    broadcast_to,
    expand_dims_method,
    flatten_method,
    pick,
    repeat,
    reshape_view,
    split,
    squeeze_method,
    swapaxes,
    take,
    tile,
    transpose,
)

# ------------------------------------------------------------------- helpers


def _operand(x: Any, like: NDArray) -> NDArray | None:
    return x if isinstance(x, NDArray) else None


def _raw_operand(x: Any, like: NDArray) -> Any:
    if isinstance(x, NDArray):
        return as_raw(x, like)
    if isinstance(x, (list, tuple)):
        return like.xp.asarray(x, dtype=like._data.dtype)
    return x


# Binary elementwise rules: (forward(a, b), backward(g, a, b, out) -> (ga, gb)).
_BINARY: dict[str, tuple[Callable[..., Any], Callable[..., tuple[Any, Any]]]] = {
    "add": (lambda a, b: a + b, lambda g, a, b, o: (g, g)),
    "sub": (lambda a, b: a - b, lambda g, a, b, o: (g, -g)),
    "mul": (lambda a, b: a * b, lambda g, a, b, o: (g * b, g * a)),
    "div": (lambda a, b: a / b, lambda g, a, b, o: (g / b, -g * o / b)),
    "pow": (
        lambda a, b: a**b,
        # asarray: `a` is a Python scalar for `2.3 ** x`, and cupy.where takes no bare bool
        lambda g, a, b, o: (
            g * b * a ** (b - 1),
            g * o * _xp(o).log(_xp(o).where(_xp(o).asarray(a > 0), a, 1)),
        ),
    ),
    "maximum": (
        lambda a, b: _xp(a, b).maximum(a, b),
        lambda g, a, b, o: (g * (a >= b), g * (a < b)),
    ),
    "minimum": (
        lambda a, b: _xp(a, b).minimum(a, b),
        lambda g, a, b, o: (g * (a <= b), g * (a > b)),
    ),
    # MXNet differentiates mod as a - floor(a/b)*b, with floor(a/b) held constant
    "mod": (lambda a, b: _mod(a, b), lambda g, a, b, o: (g * (a * 0 + 1), -g * _floor_div(a, b))),
    "hypot": (lambda a, b: _xp(a, b).hypot(a, b), lambda g, a, b, o: (g * a / o, g * b / o)),
}


def _mod(a: Any, b: Any) -> Any:
    """``a % b`` with the divisor's sign, and 0 where ``b == 0`` (MXNet's rule, ints too)."""
    xp = _xp(a, b)
    with numpy.errstate(divide="ignore", invalid="ignore"):
        out = xp.where(xp.asarray(b) == 0, 0, xp.mod(a, b)).astype(xp.result_type(a, b))
    return out if out.ndim else out.item()  # two numbers give a number, as ``%`` does


def _floor_div(a: Any, b: Any) -> Any:
    with numpy.errstate(divide="ignore", invalid="ignore"):
        return _xp(a, b).floor(a / b)


def _xp(*xs: Any) -> Any:
    for x in xs:
        if hasattr(x, "__array_namespace__") or hasattr(x, "dtype"):
            from ..backend import array_module

            return array_module(x)
    return numpy


def binary(name: str, lhs: Any, rhs: Any) -> NDArray:
    """Apply a broadcasting binary op; either side may be a scalar.

    As in MXNet, a scalar operand takes the array's dtype and the result keeps it: integer
    arrays stay integer (``/`` truncates toward zero), float32 stays float32.
    """
    if not isinstance(lhs, NDArray) and not isinstance(rhs, NDArray):
        return _scalar_binary(name, lhs, rhs)
    like = lhs if isinstance(lhs, NDArray) else rhs
    a, b = _raw_operand(lhs, like), _raw_operand(rhs, like)
    forward, rule = _BINARY[name]
    try:
        out = forward(a, b)
    except ValueError as err:  # shapes that do not broadcast: MXNet's error type
        raise MXNetShapeError(f"{name}: {err}") from err
    if not hasattr(out, "shape"):
        out = like.xp.asarray(out)
    dtype = like._data.dtype
    if out.dtype != dtype and not (isinstance(lhs, NDArray) and isinstance(rhs, NDArray)
                                   and lhs._data.dtype != rhs._data.dtype):
        a, b, out = _keep_dtype(name, a, b, dtype)
    arrays = tuple(x for x in (lhs, rhs) if isinstance(x, NDArray))

    def backward(g: Any) -> list[Any]:
        ga, gb = rule(g, a, b, out)
        grads = []
        if isinstance(lhs, NDArray):
            grads.append(unbroadcast(ga, lhs.shape).astype(lhs._data.dtype, copy=False))
        if isinstance(rhs, NDArray):
            grads.append(unbroadcast(gb, rhs.shape).astype(rhs._data.dtype, copy=False))
        return grads

    result = apply_op(out, arrays, backward, like._ctx)
    if result._node is not None:
        result._node.op = ("binary", name, lhs, rhs)
    return result


def _keep_dtype(name: str, a: Any, b: Any, dtype: Any) -> tuple[Any, Any, Any]:
    """Redo ``a <name> b`` in ``dtype``: the scalar side is cast first, as MXNet does."""
    xp = _xp(a, b)
    a = a if hasattr(a, "shape") else xp.asarray(a).astype(dtype)
    b = b if hasattr(b, "shape") else xp.asarray(b).astype(dtype)
    if name == "div" and numpy.dtype(dtype).kind in "iu":
        with numpy.errstate(divide="ignore", invalid="ignore"):
            quotient = xp.trunc(a.astype(numpy.float64) / b)
        out = xp.where(b == 0, 0, quotient).astype(dtype)
    else:
        out = xp.asarray(_BINARY[name][0](a, b)).astype(dtype, copy=False)
    return a, b, out


def _scalar_binary(name: str, lhs: Any, rhs: Any) -> Any:
    """Both operands are numbers: MXNet's ``nd.power(0.9, 3)`` returns a Python number."""
    return _BINARY[name][0](lhs, rhs)


def _compare(fn: Callable[[Any, Any], Any]) -> Callable[[NDArray, Any], NDArray]:
    def op(self: NDArray, other: Any) -> NDArray:
        out = fn(self._data, _raw_operand(other, self))
        if not is_np_array():  # mx.np arrays compare to bools; legacy ones to 0/1 values
            out = out.astype(self._data.dtype)
        # recorded with zero gradients, as MXNet's comparison operators are
        inputs = (self, other) if isinstance(other, NDArray) else (self,)
        return apply_op(out, inputs, lambda g: tuple(
            _xp(g).zeros(x.shape, x._data.dtype) for x in inputs))

    return op


# Unary rules: (forward(x), backward(g, x, out)).
_UNARY: dict[str, tuple[Callable[[Any], Any], Callable[[Any, Any, Any], Any]]] = {
    "negative": (lambda x: -x, lambda g, x, o: -g),
    "abs": (lambda x: abs(x), lambda g, x, o: g * _xp(x).sign(x)),
    "exp": (lambda x: _rounded_float32(_xp(x).exp, x), lambda g, x, o: g * o),
    "log": (lambda x: _rounded_float32(_xp(x).log, x), lambda g, x, o: g / x),
    "log1p": (lambda x: _xp(x).log1p(x), lambda g, x, o: g / (1 + x)),
    "expm1": (lambda x: _xp(x).expm1(x), lambda g, x, o: g * (o + 1)),
    "sqrt": (lambda x: _xp(x).sqrt(x), lambda g, x, o: g / (2 * o)),
    "rsqrt": (lambda x: 1 / _xp(x).sqrt(x), lambda g, x, o: -0.5 * g * o**3),
    "square": (lambda x: x * x, lambda g, x, o: 2 * g * x),
    "reciprocal": (lambda x: 1 / x, lambda g, x, o: -g * o * o),
    "sin": (lambda x: _xp(x).sin(x), lambda g, x, o: g * _xp(x).cos(x)),
    "cos": (lambda x: _xp(x).cos(x), lambda g, x, o: -g * _xp(x).sin(x)),
    "tanh": (lambda x: _xp(x).tanh(x), lambda g, x, o: g * (1 - o * o)),
    "sigmoid": (lambda x: _sigmoid(x), lambda g, x, o: g * o * (1 - o)),
    # sign(relu(x)) is 1, 0, or NaN at NaN: MXNet's relu gradient propagates NaN
    "relu": (lambda x: _xp(x).maximum(x, 0), lambda g, x, o: g * _xp(o).sign(o)),
    "softsign": (lambda x: x / (1 + abs(x)), lambda g, x, o: g / (1 + abs(x)) ** 2),
    "softrelu": (
        lambda x: _xp(x).logaddexp(0, x),
        lambda g, x, o: g * _sigmoid(x),
    ),
    "sign": (lambda x: _xp(x).sign(x), lambda g, x, o: _xp(x).zeros_like(x)),
    "floor": (lambda x: _xp(x).floor(x), lambda g, x, o: _xp(x).zeros_like(x)),
    "ceil": (lambda x: _xp(x).ceil(x), lambda g, x, o: _xp(x).zeros_like(x)),
    # MXNet's round takes halves away from zero (numpy's goes to even)
    "round": (lambda x: (_xp(x).sign(x) * _xp(x).floor(abs(x) + 0.5)).astype(x.dtype),
              lambda g, x, o: _xp(x).zeros_like(x)),
}


def _rounded_float32(ufunc: Any, x: Any) -> Any:
    """``ufunc(x)``; float32 data on the cpu is computed in float64 and rounded. numpy's
    vectorized float32 exp and log are up to 2-3 units in the last place off the rounded
    result (MXNet's libm functions are within 1), which MXNet's own tolerances notice."""
    if x.dtype != numpy.float32 or not isinstance(x, numpy.ndarray):
        return ufunc(x)
    return ufunc(x, out=numpy.empty_like(x), dtype=numpy.float64, casting="unsafe")


def _sigmoid(x: Any) -> Any:
    xp = _xp(x)
    # Split by sign so neither branch overflows exp.
    e = xp.exp(-abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


def unary(name: str, x: NDArray) -> NDArray:
    forward, rule = _UNARY[name]
    data = x._data
    out = forward(data).astype(data.dtype, copy=False)
    result = apply_op(
        out, (x,), lambda g: (rule(g, data, out).astype(data.dtype, copy=False),))
    if result._node is not None:
        result._node.op = ("unary", name)
    return result


def clip(x: NDArray, a_min: Any, a_max: Any) -> NDArray:
    data = x._data
    out = x.xp.clip(data, a_min, a_max)
    lo = -numpy.inf if a_min is None else a_min
    hi = numpy.inf if a_max is None else a_max
    inside = (data >= lo) & (data <= hi)
    result = apply_op(out, (x,), lambda g: (g * inside,))
    if result._node is not None:  # the gradient scales by a constant mask (second order 0)
        result._node.op = ("scale", inside)
    return result


def where(cond: Any, x: NDArray, y: NDArray) -> NDArray:
    c = as_raw(cond) != 0
    xa, ya = as_raw(x), as_raw(y)
    out = x.xp.where(c, xa, ya)
    arrays = tuple(a for a in (x, y) if isinstance(a, NDArray))

    def backward(g: Any) -> list[Any]:
        grads = []
        if isinstance(x, NDArray):
            grads.append(unbroadcast(g * c, x.shape))
        if isinstance(y, NDArray):
            grads.append(unbroadcast(g * ~c, y.shape))
        return grads

    return apply_op(out, arrays, backward)


# ---------------------------------------------------------------- reductions


def _axes(axis: Any, ndim: int, exclude: bool = False) -> tuple[int, ...] | None:
    if axis is None or axis == ():
        return None  # every axis, with or without exclude (as MXNet's reduce ops)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(a % ndim for a in axes)
    if exclude:
        return tuple(i for i in range(ndim) if i not in axes)
    return axes


def _expand_back(g: Any, shape: tuple[int, ...], axes: tuple[int, ...] | None) -> Any:
    if axes is None:
        return g.reshape((1,) * len(shape))
    kept = [1 if i in axes else n for i, n in enumerate(shape)]
    return g.reshape(kept)


def reduce_sum(x: NDArray, axis: Any = None, keepdims: bool = False, exclude: bool = False):
    axes = _axes(axis, x.ndim, exclude)
    data = x._data
    if data.dtype == numpy.float16:  # MXNet accumulates half precision in float32
        out = data.sum(axis=axes, keepdims=keepdims, dtype=numpy.float32).astype(data.dtype)
    else:
        out = data.sum(axis=axes, keepdims=keepdims)
    shape = x.shape
    xp = x.xp
    result = apply_op(
        xp.asarray(out), (x,),
        lambda g: (xp.broadcast_to(_expand_back(g, shape, axes), shape),),
    )
    if result._node is not None:
        result._node.op = ("sum", axes, 1)
    return result


def reduce_mean(x: NDArray, axis: Any = None, keepdims: bool = False, exclude: bool = False,
                dtype: Any = None):
    axes = _axes(axis, x.ndim, exclude)
    acc = numpy.float32 if x._data.dtype == numpy.float16 else None
    out_dtype = numpy.dtype(dtype) if dtype is not None else x._data.dtype
    if dtype is None and out_dtype.kind in "iub" and (
            is_np_array() or shape_rules.numpy_front_end):
        out_dtype = numpy.dtype(numpy.float32)  # mx.np: the mean of integers is a float
        acc = numpy.float64
    out = x._data.mean(axis=axes, keepdims=keepdims, dtype=acc)
    shape = x.shape
    count = x.size if axes is None else int(numpy.prod([shape[a] for a in axes]))
    xp = x.xp
    result = apply_op(
        xp.asarray(out, dtype=out_dtype), (x,),
        lambda g: (xp.broadcast_to(_expand_back(g, shape, axes) / count, shape),),
    )
    if result._node is not None:
        result._node.op = ("sum", axes, count)
    return result


def _reduce_extreme(fn_name: str):
    def op(x: NDArray, axis: Any = None, keepdims: bool = False, exclude: bool = False):
        axes = _axes(axis, x.ndim, exclude)
        data = x._data
        out = getattr(data, fn_name)(axis=axes, keepdims=keepdims)
        shape = x.shape
        xp = x.xp

        def backward(g: Any) -> tuple[Any]:
            kept = _expand_back(xp.asarray(out), shape, axes)
            mask = data == kept
            # Ties share the gradient equally, so the rule stays a valid subgradient.
            share = mask / mask.sum(axis=axes, keepdims=True)
            return (share * _expand_back(g, shape, axes),)

        return apply_op(xp.asarray(out), (x,), backward)

    return op


reduce_max = _reduce_extreme("max")
reduce_min = _reduce_extreme("min")


def prod(x: NDArray, axis: Any = None, keepdims: bool = False) -> NDArray:
    axes = _axes(axis, x.ndim)
    data = x._data
    out = x.xp.asarray(data.prod(axis=axes, keepdims=keepdims))
    shape = x.shape
    return apply_op(
        out, (x,),
        lambda g: (_expand_back(g * out, shape, axes) / data,),
    )


def norm(x: NDArray, ord: int = 2, axis: Any = None, keepdims: bool = False) -> NDArray:
    if ord == 1:
        return reduce_sum(unary("abs", x), axis=axis, keepdims=keepdims)
    if ord != 2:
        raise ValueError(f"norm supports ord 1 or 2, got {ord}")
    return unary("sqrt", reduce_sum(unary("square", x), axis=axis, keepdims=keepdims))


def argmax(x: NDArray, axis: int | None = None, keepdims: bool = False) -> NDArray:
    out = x.xp.asarray(x._data.argmax(axis=axis))
    if keepdims and axis is not None:
        out = x.xp.expand_dims(out, axis)
    if legacy_shape(out, (x,)):
        out = out.reshape((1,))
    return NDArray(out.astype(x._data.dtype), x._ctx)


def argmin(x: NDArray, axis: int | None = None, keepdims: bool = False) -> NDArray:
    out = x.xp.asarray(x._data.argmin(axis=axis))
    if keepdims and axis is not None:
        out = x.xp.expand_dims(out, axis)
    if legacy_shape(out, (x,)):
        out = out.reshape((1,))
    return NDArray(out.astype(x._data.dtype), x._ctx)


def dot(
    lhs: NDArray, rhs: NDArray, transpose_a: bool = False, transpose_b: bool = False
) -> NDArray:
    """Matrix product with MXNet's ``dot`` semantics (N-d: contracts last axis of lhs with
    the first axis of rhs)."""
    a, b = lhs._data, rhs._data
    if transpose_a:
        a = a.T
    if transpose_b:
        b = b.T
    if a.ndim and b.ndim and a.shape[-1] != b.shape[0]:
        raise MXNetShapeError(
            f"dot: shape mismatch, lhs {a.shape} and rhs {b.shape} "
            f"(lhs's last axis {a.shape[-1]} != rhs's first axis {b.shape[0]})"
        )
    xp = lhs.xp
    out = xp.tensordot(a, b, axes=1) if a.ndim and b.ndim else a * b
    matrices = lhs.ndim == 2 and rhs.ndim == 2  # the products higher_order differentiates

    def backward(g: Any) -> tuple[Any, Any]:
        a2 = a.reshape(-1, a.shape[-1])
        b2 = b.reshape(b.shape[0], -1)
        g2 = g.reshape(a2.shape[0], b2.shape[1])
        ga = gb = None
        if needs_grad(lhs):
            ga = (g2 @ b2.T).reshape(a.shape)
            ga = ga.T if transpose_a else ga
        if needs_grad(rhs):
            gb = (a2.T @ g2).reshape(b.shape)
            gb = gb.T if transpose_b else gb
        return (ga, gb)

    result = apply_op(out, (lhs, rhs), backward)
    if matrices and result._node is not None:
        result._node.op = ("dot", transpose_a, transpose_b)
    return result


def batch_dot(
    lhs: NDArray, rhs: NDArray, transpose_a: bool = False, transpose_b: bool = False
) -> NDArray:
    xp = lhs.xp
    a = lhs._data.swapaxes(-1, -2) if transpose_a else lhs._data
    b = rhs._data.swapaxes(-1, -2) if transpose_b else rhs._data
    if a.shape[-1] != b.shape[-2]:
        raise MXNetShapeError(f"batch_dot: shape mismatch, {a.shape} @ {b.shape}")
    out = xp.matmul(a, b)

    def backward(g: Any) -> tuple[Any, Any]:
        ga = xp.matmul(g, b.swapaxes(-1, -2))
        gb = xp.matmul(a.swapaxes(-1, -2), g)
        return (
            ga.swapaxes(-1, -2) if transpose_a else ga,
            gb.swapaxes(-1, -2) if transpose_b else gb,
        )

    return apply_op(out, (lhs, rhs), backward)


def stop_gradient(x: NDArray) -> NDArray:
    """A new array with ``x``'s values that autograd treats as a constant (``BlockGrad``)."""
    return NDArray(x._data.copy(), x._ctx)


# ------------------------------------------------------ NDArray operator table


def _inplace(name: str) -> Callable[[NDArray, Any], NDArray]:
    forward = _BINARY[name][0]

    def op(self: NDArray, other: Any) -> NDArray:
        from .. import autograd

        if autograd.is_recording():  # x += y cannot be recorded in place, as in MXNet
            check_inplace_write(self, other)
        result = forward(self._data, _raw_operand(other, self))
        self._data[...] = result
        return self

    return op


def _reflected(name: str) -> Callable[[NDArray, Any], NDArray]:
    return lambda self, other: binary(name, other, self)


def _install_operators() -> None:
    cls: Any = NDArray
    for dunder, name in [("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "div"),
                         ("pow", "pow"), ("mod", "mod")]:
        setattr(cls, f"__{dunder}__", lambda self, o, _n=name: binary(_n, self, o))
        setattr(cls, f"__r{dunder}__", _reflected(name))
        setattr(cls, f"__i{dunder}__", _inplace(name))
    cls.__div__ = cls.__truediv__
    cls.__neg__ = lambda self: unary("negative", self)
    cls.__pos__ = lambda self: self
    cls.__abs__ = lambda self: unary("abs", self)
    cls.__matmul__ = lambda self, o: dot(self, o)
    for dunder, fn in [("eq", numpy.equal), ("ne", numpy.not_equal), ("lt", numpy.less),
                       ("le", numpy.less_equal), ("gt", numpy.greater),
                       ("ge", numpy.greater_equal)]:
        setattr(cls, f"__{dunder}__", _compare(lambda a, b, _f=fn: _xp(a).asarray(_f(a, b))))

    for name in _UNARY:
        setattr(cls, name, lambda self, _n=name: unary(_n, self))
    cls.sum = lambda self, axis=None, keepdims=False, exclude=False: reduce_sum(
        self, axis, keepdims, exclude)
    cls.mean = lambda self, axis=None, keepdims=False, exclude=False: reduce_mean(
        self, axis, keepdims, exclude)
    cls.max = lambda self, axis=None, keepdims=False: reduce_max(self, axis, keepdims)
    cls.min = lambda self, axis=None, keepdims=False: reduce_min(self, axis, keepdims)
    cls.prod = prod
    cls.norm = norm
    cls.argmax = argmax
    cls.argmin = argmin
    cls.clip = lambda self, a_min=None, a_max=None: clip(self, a_min, a_max)
    cls.reshape = reshape_view
    cls.transpose = transpose
    cls.expand_dims = expand_dims_method
    cls.squeeze = squeeze_method
    cls.flatten = flatten_method
    cls.broadcast_to = broadcast_to
    cls.broadcast_like = lambda self, other: broadcast_to(self, other.shape)
    cls.tile = lambda self, reps: tile(self, reps)
    cls.repeat = repeat
    cls.swapaxes = swapaxes
    cls.take = take
    cls.pick = pick
    cls.dot = dot
    cls.split = split
    cls.zeros_like = lambda self: NDArray(self.xp.zeros_like(self._data), self._ctx)
    cls.ones_like = lambda self: NDArray(self.xp.ones_like(self._data), self._ctx)
    cls.as_np_ndarray = lambda self: self
    cls.as_nd_ndarray = lambda self: self


_install_operators()

