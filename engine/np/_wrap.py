"""How ``engine.np`` turns numpy's functions into differentiable ``mx.np`` ones.

Three kinds cover most of numpy's API:

- :func:`numpy_values`: results that carry no gradient (comparisons, indices, counts,
  sorting orders): computed by numpy on the raw data, wrapped as arrays.
- :func:`rearranging`: functions that only move, repeat or drop elements, or fill in zeros
  (flip, roll, tril, pad, diagonal, resize, ...). Their gradient is found by running the
  same function on the element numbers 1..n: each output position then names the input
  element it came from (0 for a filled-in zero), and the gradient is summed back there.
- everything else is written with the differentiable ``engine.nd`` operators.

Every function runs under mx.np's shape rule (0-d results stay 0-d).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy

from ..context import current_context
from ..ndarray.ndarray import NDArray, apply_op, numpy_shapes

DEFAULT_FLOAT = numpy.float32  # mx.np's dtype for Python numbers and lists


def as_array(value: Any, like: NDArray | None = None) -> NDArray:
    """``value`` as an NDArray (numbers and lists in float32, as ``mx.np.array`` makes them;
    numpy arrays keep their dtype)."""
    if isinstance(value, NDArray):
        return value
    host = numpy.asarray(value)
    if not isinstance(value, (numpy.ndarray, numpy.generic)):
        host = host.astype(DEFAULT_FLOAT)
    ctx = like.context if like is not None else current_context()
    return NDArray(ctx.xp.asarray(host), ctx)


def raw(value: Any) -> Any:
    return value.raw if isinstance(value, NDArray) else value


def zero_dim(func: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``func`` under mx.np's shape rule (full reductions are 0-d)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with numpy_shapes():
            return func(*args, **kwargs)

    return wrapper


def _first_array(args: tuple[Any, ...]) -> NDArray | None:
    for a in args:
        if isinstance(a, NDArray):
            return a
        if isinstance(a, (list, tuple)):
            found = _first_array(tuple(a))
            if found is not None:
                return found
    return None


def _wrap_result(result: Any, like: NDArray | None) -> Any:
    if isinstance(result, (list, tuple)):
        return type(result)(_wrap_result(r, like) for r in result)
    if isinstance(result, (numpy.ndarray, numpy.generic)) or hasattr(
            result, "__cuda_array_interface__"):
        ctx = like.context if like is not None else current_context()
        return NDArray(ctx.xp.asarray(result), ctx)
    return result


def _raw_args(value: Any) -> Any:
    if isinstance(value, NDArray):
        return value.raw
    if isinstance(value, list):
        return [_raw_args(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_raw_args(v) for v in value)
    return value


def numpy_values(fn: Callable[..., Any], name: str | None = None) -> Callable[..., Any]:
    """``fn`` (a numpy function) on the raw data of its array arguments; the results are
    arrays without a gradient."""

    @functools.wraps(fn)
    def op(*args: Any, **kwargs: Any) -> Any:
        like = _first_array(args)
        if like is None:
            like = _first_array(tuple(kwargs.values()))
        xp = like.xp if like is not None else numpy
        target = getattr(xp, fn.__name__, fn) if xp is not numpy else fn
        result = target(*_raw_args(args), **{k: _raw_args(v) for k, v in kwargs.items()})
        return _wrap_result(result, like)

    if name:
        op.__name__ = name
    return op


def rearranging(fn: Callable[..., Any]) -> Callable[..., NDArray]:
    """``fn(a, ...)`` that only moves, repeats or drops ``a``'s elements, or fills in zeros,
    made differentiable (see the module's docstring)."""

    @functools.wraps(fn)
    def op(a: Any, *args: Any, **kwargs: Any) -> NDArray:
        arr = as_array(a)
        xp = arr.xp
        src = arr.raw
        out = xp.asarray(fn(src, *args, **kwargs))

        def backward(g: Any) -> tuple[Any]:
            numbers = xp.arange(1, src.size + 1, dtype=numpy.int64).reshape(src.shape)
            origin = xp.asarray(fn(numbers, *args, **kwargs)).reshape(-1)
            sums = xp.bincount(origin, weights=g.reshape(-1).astype(numpy.float64),
                               minlength=src.size + 1)
            return (sums[1:].reshape(src.shape).astype(src.dtype),)

        with numpy_shapes():
            return apply_op(out, (arr,), backward)

    return op


def pieces(fn: Callable[..., Any]) -> Callable[..., list[NDArray]]:
    """``fn(a, ...)`` returning a list of rearrangements of ``a`` (split-like), each
    differentiable as :func:`rearranging` makes it."""

    @functools.wraps(fn)
    def op(a: Any, *args: Any, **kwargs: Any) -> list[NDArray]:
        count = len(fn(raw(as_array(a)), *args, **kwargs))
        return [rearranging(lambda x, *p, _i=i, **k: fn(x, *p, **k)[_i])(a, *args, **kwargs)
                for i in range(count)]

    return op
