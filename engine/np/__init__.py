"""``engine.np``: the numpy-style namespace (MXNet's ``mx.np``) over the same NDArray type.

>>> from engine import np
>>> x = np.random.uniform(size=(2, 3))
>>> np.ones((2, 3)).shape == x.shape
True
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as _numpy

from .. import ndarray as _nd
from .. import util as _util
from ..ndarray import NDArray as ndarray  # noqa: N813 - numpy's lowercase type name
from ..ndarray.ndarray import numpy_shapes as _numpy_shapes
from . import random

float16, float32, float64 = _numpy.float16, _numpy.float32, _numpy.float64
int8, int32, int64 = _numpy.int8, _numpy.int32, _numpy.int64
uint8, bool_ = _numpy.uint8, _numpy.bool_
bool = bool_  # noqa: A001 - mx.np's name for numpy's bool type
pi, e, inf, nan = _numpy.pi, _numpy.e, _numpy.inf, _numpy.nan
newaxis = None


def _zero_dim(func: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``func`` under mx.np's shape rule: full reductions and vector dots are 0-d, where
    the legacy ``mx.nd`` operators it calls would return shape ``(1,)``."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _numpy_shapes():
            return func(*args, **kwargs)

    return wrapper


def array(object: Any, dtype: Any = None, ctx: Any = None, device: Any = None) -> ndarray:  # noqa: A002
    """As numpy's ``array``, with mx.np's default dtype: Python numbers, lists and bools
    become float32 (float64 under ``npx.set_np(dtype=True)``); numpy arrays and NDArrays keep
    their dtype."""
    if isinstance(object, ndarray):
        return _nd.array(object, ctx=ctx or device, dtype=dtype or object.dtype)
    host = _numpy.asarray(object)
    if dtype is None:
        if isinstance(object, (_numpy.ndarray, _numpy.generic)):
            dtype = host.dtype
        else:
            dtype = _numpy.float64 if _util.is_np_default_dtype() else _numpy.float32
    return _nd.array(host, ctx=ctx or device, dtype=dtype)


asarray = array


def _c_order(order: str) -> None:
    if order != "C":
        raise NotImplementedError(f"order={order!r}: arrays are stored in C order only")


def zeros(shape: Any, dtype: Any = None, order: str = "C", ctx: Any = None,
          device: Any = None) -> ndarray:
    _c_order(order)
    return _nd.zeros(shape, ctx=ctx or device, dtype=dtype)


def ones(shape: Any, dtype: Any = None, order: str = "C", ctx: Any = None,
         device: Any = None) -> ndarray:
    _c_order(order)
    return _nd.ones(shape, ctx=ctx or device, dtype=dtype)


def empty(shape: Any, dtype: Any = None, order: str = "C", ctx: Any = None,
          device: Any = None) -> ndarray:
    _c_order(order)
    return _nd.zeros(shape, ctx=ctx or device, dtype=dtype)


def full(shape: Any, fill_value: float, dtype: Any = None, ctx: Any = None,
         device: Any = None) -> ndarray:
    return _nd.full(shape, fill_value, ctx=ctx or device, dtype=dtype)


def arange(start: float, stop: float | None = None, step: float = 1, dtype: Any = None,
           ctx: Any = None, device: Any = None) -> ndarray:
    return _nd.arange(start, stop, step, ctx=ctx or device, dtype=dtype)


def linspace(start: float, stop: float, num: int = 50, endpoint: bool = True, dtype: Any = None,
             ctx: Any = None) -> ndarray:
    return _nd.linspace(start, stop, num, endpoint, ctx=ctx, dtype=dtype)


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None, ctx: Any = None) -> ndarray:  # noqa: N803
    return _nd.eye(N, M or 0, k, ctx=ctx, dtype=dtype)


zeros_like, ones_like, full_like = _nd.zeros_like, _nd.ones_like, _nd.full_like


@_zero_dim
def sum(a: ndarray, axis: Any = None, keepdims: bool = False) -> ndarray:  # noqa: A001
    return _nd.sum(a, axis, keepdims)


@_zero_dim
def mean(a: ndarray, axis: Any = None, dtype: Any = None, out: ndarray | None = None,
         keepdims: bool = False) -> ndarray:
    """Mean over ``axis``; integer and bool arrays give float32 (mx.np's rule)."""
    from ..ndarray.ndarray import write_out
    from ..ndarray.ops import reduce_mean

    return write_out(reduce_mean(a, axis, keepdims, dtype=dtype), out)


@_zero_dim
def max(a: ndarray, axis: Any = None, keepdims: bool = False) -> ndarray:  # noqa: A001
    return _nd.max(a, axis, keepdims)


@_zero_dim
def min(a: ndarray, axis: Any = None, keepdims: bool = False) -> ndarray:  # noqa: A001
    return _nd.min(a, axis, keepdims)


@_zero_dim
def prod(a: ndarray, axis: Any = None, keepdims: bool = False) -> ndarray:
    return _nd.prod(a, axis, keepdims)


@_zero_dim
def argmax(a: ndarray, axis: int | None = None) -> ndarray:
    out = _nd.argmax(a, axis)
    return out.astype(_numpy.int64)


@_zero_dim
def argmin(a: ndarray, axis: int | None = None) -> ndarray:
    return _nd.argmin(a, axis).astype(_numpy.int64)


@_zero_dim
def dot(a: ndarray, b: ndarray) -> ndarray:
    return _nd.dot(a, b)


@_zero_dim
def matmul(a: ndarray, b: ndarray) -> ndarray:
    if a.ndim <= 2 and b.ndim <= 2:
        return _nd.dot(a, b)
    return _nd.batch_dot(a, b)


def concatenate(seq: Any, axis: int = 0) -> ndarray:
    return _nd.concat(list(seq), axis=axis)


def stack(arrays: Any, axis: int = 0) -> ndarray:
    return _nd.stack(list(arrays), axis=axis)


def reshape(a: ndarray, newshape: Any) -> ndarray:
    return a.reshape(newshape)


def transpose(a: ndarray, axes: Any = None) -> ndarray:
    return a.transpose(axes) if axes is not None else a.transpose()


def expand_dims(a: ndarray, axis: int) -> ndarray:
    return a.expand_dims(axis)


@_zero_dim
def squeeze(a: ndarray, axis: Any = None) -> ndarray:
    return a.squeeze(axis)


@_zero_dim
def clip(a: ndarray, a_min: Any, a_max: Any) -> ndarray:
    return _nd.clip(a, a_min, a_max)


@_zero_dim
def where(condition: Any, x: Any, y: Any) -> ndarray:
    return _nd.where(condition, x, y)


def copy(a: ndarray) -> ndarray:
    return a.copy()


def split(a: ndarray, indices_or_sections: int, axis: int = 0) -> list[ndarray]:
    return _nd.split(a, indices_or_sections, axis=axis)


def tile(a: ndarray, reps: Any) -> ndarray:
    return _nd.tile(a, reps if isinstance(reps, (tuple, list)) else (reps,))


def repeat(a: ndarray, repeats: int, axis: int | None = None) -> ndarray:
    return _nd.repeat(a, repeats, axis)


def broadcast_to(a: ndarray, shape: Any) -> ndarray:
    return a.broadcast_to(shape)


def allclose(a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-8) -> bool:
    return bool(_numpy.allclose(_numpy.asarray(a), _numpy.asarray(b), rtol, atol))


def asnumpy(a: ndarray) -> _numpy.ndarray:
    return a.asnumpy()


exp, log, log1p, expm1, sqrt = _nd.exp, _nd.log, _nd.log1p, _nd.expm1, _nd.sqrt
square, abs, absolute, sign, tanh = _nd.square, _nd.abs, _nd.abs, _nd.sign, _nd.tanh  # noqa: A001
sin, cos, floor, ceil, negative, reciprocal = (_nd.sin, _nd.cos, _nd.floor, _nd.ceil,
                                                _nd.negative, _nd.reciprocal)
add, subtract, multiply, divide, true_divide, power = (
    _nd.add, _nd.subtract, _nd.multiply, _nd.divide, _nd.divide, _nd.power)
maximum, minimum = _nd.maximum, _nd.minimum


def identity(n: int, dtype: Any = None, ctx: Any = None) -> ndarray:
    return eye(n, dtype=dtype, ctx=ctx)


def empty_like(prototype: ndarray, dtype: Any = None, order: str = "C", subok: bool = False,
               shape: Any = None) -> ndarray:
    return _nd.zeros(shape or prototype.shape, ctx=prototype.context,
                     dtype=dtype or prototype.dtype)


def logspace(start: float, stop: float, num: int = 50, endpoint: bool = True,
             base: float = 10.0, dtype: Any = None, axis: int = 0, ctx: Any = None) -> ndarray:
    values = _numpy.logspace(start, stop, num, endpoint, base, axis=axis)
    return array(values.astype(dtype or _numpy.float32), ctx=ctx)


def _window(name: str) -> Any:
    def window(M: int, dtype: Any = None, ctx: Any = None) -> ndarray:  # noqa: N803
        return array(getattr(_numpy, name)(M).astype(dtype or _numpy.float32), ctx=ctx)

    window.__name__ = name
    window.__doc__ = f"numpy's ``{name}`` window, float32 by default."
    return window


hamming, hanning, blackman = _window("hamming"), _window("hanning"), _window("blackman")


def genfromtxt(*args: Any, **kwargs: Any) -> ndarray:
    """numpy's ``genfromtxt``, as an array (float32 unless ``dtype`` says)."""
    kwargs.setdefault("dtype", _numpy.float32)
    return array(_numpy.genfromtxt(*args, **kwargs))


def set_printoptions(precision: int | None = None, threshold: int | None = None,
                     **kwargs: Any) -> None:
    """How arrays print (numpy's options; NDArray prints through numpy)."""
    _numpy.set_printoptions(precision=precision, threshold=threshold, **kwargs)


# isort: split
from . import linalg  # noqa: E402
from .elementwise import *  # noqa: E402,F403
from .manipulation import *  # noqa: E402,F403
from .statistics import *  # noqa: E402,F403
from .statistics import all_ as all  # noqa: E402,A004 - numpy's names
from .statistics import any_ as any  # noqa: E402,A004

__all__ = [n for n in dir() if not n.startswith("_")]
