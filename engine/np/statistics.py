"""``mx.np``'s reductions, statistics, sorting and tensor products.

Differentiable ones are written with the ``engine.nd`` operators (``std`` is a mean of
squares, ``einsum`` records its own rule); counts, orders and quantiles carry no gradient.

>>> from engine import np
>>> float(np.std(np.array([1.0, 3.0]))), np.einsum("ij,j->i", np.ones((2, 3)), np.ones(3)).shape
(1.0, (2,))
"""

from __future__ import annotations

from typing import Any

import numpy

from .. import ndarray as _nd
from ..ndarray.ndarray import NDArray, apply_op, write_out
from ._wrap import as_array, numpy_values, rearranging, zero_dim


@zero_dim
def amax(a: Any, axis: Any = None, keepdims: bool = False, **_: Any) -> NDArray:
    return _nd.max(as_array(a), axis, keepdims)


@zero_dim
def amin(a: Any, axis: Any = None, keepdims: bool = False, **_: Any) -> NDArray:
    return _nd.min(as_array(a), axis, keepdims)


@zero_dim
def product(a: Any, axis: Any = None, keepdims: bool = False, **_: Any) -> NDArray:
    return _nd.prod(as_array(a), axis, keepdims)


def _logical_reduction(name: str) -> Any:
    fn = numpy_values(getattr(numpy, name))

    @zero_dim
    def op(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> NDArray:
        return fn(as_array(a), axis=axis, keepdims=keepdims)

    op.__name__ = name
    return op


all_, any_ = _logical_reduction("all"), _logical_reduction("any")  # numpy's all and any
sometrue = any_


@zero_dim
def var(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
        keepdims: bool = False) -> NDArray:
    """Variance (differentiable), ``ddof`` subtracted from the count."""
    x = as_array(a)
    if dtype is not None:
        x = x.astype(dtype)
    mean = _nd.mean(x, axis, True)
    squares = _nd.mean(_nd.square(x - mean), axis, keepdims)
    count = x.size if axis is None else int(numpy.prod(
        [x.shape[i] for i in ((axis,) if isinstance(axis, int) else axis)]))
    return squares * (count / max(count - ddof, 0)) if ddof else squares


@zero_dim
def std(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
        keepdims: bool = False) -> NDArray:
    return _nd.sqrt(var(a, axis, dtype, out, ddof, keepdims))


@zero_dim
def average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False) -> Any:
    """Mean, or weighted mean with ``weights`` (``returned=True`` adds the weights' sum)."""
    x = as_array(a)
    if weights is None:
        avg = _nd.mean(x, axis)
        total = as_array(numpy.asarray(x.size if axis is None else x.shape[axis], x.dtype), x)
    else:
        w = as_array(weights, x).astype(x.dtype)
        if w.shape != x.shape and axis is not None:
            shape = [1] * x.ndim
            shape[axis] = w.shape[0]
            w = w.reshape(tuple(shape))
        total = _nd.sum(w.broadcast_to(x.shape), axis)
        avg = _nd.sum(x * w, axis) / total
    return (avg, total) if returned else avg


def _quantiles(name: str) -> Any:
    fn = getattr(numpy, name)

    @zero_dim
    def op(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: Any = None,
           interpolation: str = "linear", keepdims: bool = False) -> NDArray:
        x = as_array(a)
        qs = q.asnumpy() if isinstance(q, NDArray) else q
        result = fn(x.asnumpy(), qs, axis=axis, method=interpolation, keepdims=keepdims)
        return as_array(numpy.asarray(result, x.dtype), x)

    op.__name__ = name
    return op


percentile, quantile = _quantiles("percentile"), _quantiles("quantile")


@zero_dim
def sort(a: Any, axis: int | None = -1, kind: Any = None, order: Any = None) -> NDArray:
    return _nd.sort(as_array(a), axis=axis)


@zero_dim
def argsort(a: Any, axis: int | None = -1, kind: Any = None, order: Any = None) -> NDArray:
    return _nd.argsort(as_array(a), axis=axis, dtype="int64")


@zero_dim
def cumsum(a: Any, axis: int | None = None, dtype: Any = None, out: Any = None) -> NDArray:
    return write_out(_nd.cumsum(as_array(a), axis=axis, dtype=dtype), out)


@zero_dim
def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None):
    """``n``-th discrete difference along ``axis`` (differentiable)."""
    x = as_array(a)
    if prepend is not None or append is not None:
        from .manipulation import append as _append

        parts = [p for p in (prepend, x, append) if p is not None]
        x = parts[0] if len(parts) == 1 else as_array(parts[0], x)
        for p in parts[1:]:
            x = _append(x, p, axis=axis % x.ndim)
    ax = axis % x.ndim
    for _ in range(n):
        hi = [slice(None)] * x.ndim
        lo = [slice(None)] * x.ndim
        hi[ax], lo[ax] = slice(1, None), slice(None, -1)
        x = x[tuple(hi)] - x[tuple(lo)]
    return x


def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> NDArray:
    """Differences of the flattened array, with optional values before and after."""
    return diff(as_array(ary).reshape((-1,)), prepend=to_begin, append=to_end)


@zero_dim
def trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, out: Any = None):
    diagonal = rearranging(numpy.diagonal)(a, offset, axis1, axis2)
    return write_out(_nd.sum(diagonal, -1), out)


bincount = numpy_values(numpy.bincount)


def histogram(a: Any, bins: Any = 10, range: Any = None, normed: Any = None,  # noqa: A002
              weights: Any = None, density: Any = None) -> tuple[NDArray, NDArray]:
    x = as_array(a)
    edges = bins.asnumpy() if isinstance(bins, NDArray) else bins
    counts, out_edges = numpy.histogram(x.asnumpy(), edges, range=range, density=density,
                                        weights=None if weights is None else
                                        as_array(weights).asnumpy())
    return as_array(counts, x), as_array(out_edges.astype(x.dtype), x)


def unique(ar: Any, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis: int | None = None) -> Any:
    return numpy_values(numpy.unique)(as_array(ar), return_index=return_index,
                                      return_inverse=return_inverse,
                                      return_counts=return_counts, axis=axis)


@zero_dim
def einsum(subscripts: str, *operands: Any, **_: Any) -> NDArray:
    """numpy's ``einsum`` with gradients for every operand (each operand's subscripts must
    not repeat a letter for its gradient)."""
    arrays = [as_array(o) for o in operands]
    xp = arrays[0].xp
    spec = subscripts.replace(" ", "")
    inputs, _, output = spec.partition("->")
    parts = inputs.split(",")
    if "->" not in spec:
        letters = "".join(parts)
        output = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    out = xp.einsum(spec, *(a.raw for a in arrays))

    def backward(g: Any) -> list[Any]:
        grads = []
        for i, (part, arr) in enumerate(zip(parts, arrays, strict=True)):
            others = [p for j, p in enumerate(parts) if j != i]
            known = set(output) | set("".join(others))
            reduced = "".join(c for c in part if c in known)
            grad = xp.einsum(",".join([output, *others]) + "->" + reduced, g,
                             *(a.raw for j, a in enumerate(arrays) if j != i))
            if reduced != part:  # letters only this operand had: broadcast back along them
                shape = [arr.shape[k] if c in known else 1 for k, c in enumerate(part)]
                grad = xp.broadcast_to(grad.reshape(shape), arr.shape)
            grads.append(grad.astype(arr.dtype, copy=False))
        return grads

    return apply_op(out, tuple(arrays), backward)


@zero_dim
def tensordot(a: Any, b: Any, axes: Any = 2) -> NDArray:
    x, y = as_array(a), as_array(b)
    if isinstance(axes, int):
        axes = (list(range(x.ndim - axes, x.ndim)), list(range(axes)))
    ax, bx = ([axes[0]] if isinstance(axes[0], int) else list(axes[0]),
              [axes[1]] if isinstance(axes[1], int) else list(axes[1]))
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    sa = [next(letters) for _ in range(x.ndim)]
    sb = [next(letters) for _ in range(y.ndim)]
    for i, j in zip(ax, bx, strict=True):
        sb[j % y.ndim] = sa[i % x.ndim]
    out = [c for k, c in enumerate(sa) if k not in {i % x.ndim for i in ax}]
    out += [c for k, c in enumerate(sb) if k not in {j % y.ndim for j in bx}]
    return einsum(f"{''.join(sa)},{''.join(sb)}->{''.join(out)}", x, y)


@zero_dim
def inner(a: Any, b: Any) -> NDArray:
    x, y = as_array(a), as_array(b)
    if x.ndim == 0 or y.ndim == 0:
        return x * y
    return tensordot(x, y, ([-1], [-1]))


@zero_dim
def outer(a: Any, b: Any) -> NDArray:
    x, y = as_array(a).reshape((-1,)), as_array(b).reshape((-1,))
    return einsum("i,j->ij", x, y)


@zero_dim
def vdot(a: Any, b: Any) -> NDArray:
    return einsum("i,i->", as_array(a).reshape((-1,)), as_array(b).reshape((-1,)))


@zero_dim
def polyval(p: Any, x: Any) -> NDArray:
    """The polynomial with coefficients ``p`` (highest power first) at ``x``."""
    coeffs, points = as_array(p), as_array(x)
    result = points * 0 + coeffs[0]
    for i in range(1, coeffs.shape[0]):
        result = result * points + coeffs[i]
    return result


__all__ = [
    "all_", "amax", "amin", "any_", "argsort", "average", "bincount", "cumsum", "diff",
    "ediff1d", "einsum", "histogram", "inner", "outer", "percentile", "polyval", "product",
    "quantile", "sometrue", "sort", "std", "tensordot", "trace", "unique", "var", "vdot",
]
