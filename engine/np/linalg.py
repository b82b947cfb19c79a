"""``mx.np.linalg``: numpy's linear algebra on (batches of) matrices.

``inv``, ``det``, ``slogdet``, ``solve``, ``cholesky``, ``norm``, ``tensorinv`` and
``tensorsolve`` are differentiable; the decompositions ``eig``, ``eigh``, ``svd`` and
``pinv`` give values only.

>>> from engine import np
>>> a = np.array([[2.0, 0.0], [0.0, 4.0]])
>>> np.linalg.inv(a).asnumpy().tolist(), float(np.linalg.det(a))
([[0.5, 0.0], [0.0, 0.25]], 8.0)
"""

from __future__ import annotations

from typing import Any

import numpy

from .. import ndarray as _nd
from ..ndarray.ndarray import NDArray, apply_op
from ._wrap import as_array, numpy_values, zero_dim


def _t(x: Any) -> Any:
    return x.swapaxes(-1, -2)


@zero_dim
def inv(a: Any) -> NDArray:
    x = as_array(a)
    xp = x.xp
    out = xp.linalg.inv(x.raw)
    return apply_op(out, (x,), lambda g: (-_t(out) @ g @ _t(out),))


@zero_dim
def det(a: Any) -> NDArray:
    x = as_array(a)
    xp = x.xp
    out = xp.linalg.det(x.raw)
    return apply_op(out, (x,), lambda g: (
        (g * out)[..., None, None] * _t(xp.linalg.inv(x.raw)),))


@zero_dim
def slogdet(a: Any) -> tuple[NDArray, NDArray]:
    """(sign, log |det|); the gradient flows through the log."""
    x = as_array(a)
    xp = x.xp
    sign, logdet = xp.linalg.slogdet(x.raw)
    log_part = apply_op(logdet.astype(x.dtype), (x,), lambda g: (
        g[..., None, None] * _t(xp.linalg.inv(x.raw)),))
    return NDArray(sign.astype(x.dtype), x.context), log_part


@zero_dim
def solve(a: Any, b: Any) -> NDArray:
    """``x`` with ``a @ x = b`` (gradients to both)."""
    left, right = as_array(a), as_array(b)
    xp = left.xp
    vector = right.ndim == left.ndim - 1
    rhs = right.raw[..., None] if vector else right.raw
    out = xp.linalg.solve(left.raw, rhs)

    def backward(g: Any) -> tuple[Any, Any]:
        gm = g[..., None] if vector else g
        gb = xp.linalg.solve(_t(left.raw), gm)
        ga = -gb @ _t(out)
        return ga, gb[..., 0] if vector else gb

    return apply_op(out[..., 0] if vector else out, (left, right), backward)


@zero_dim
def cholesky(a: Any) -> NDArray:
    """The lower-triangular ``L`` with ``L @ L.T = a`` (symmetric positive definite ``a``)."""
    x = as_array(a)
    xp = x.xp
    low = xp.linalg.cholesky(x.raw)

    def backward(g: Any) -> tuple[Any]:
        # Murray (2016): Φ(Lᵀ Ḡ), the lower triangle with a halved diagonal, mapped back
        phi = xp.tril(_t(low) @ g)
        idx = xp.arange(phi.shape[-1])
        phi[..., idx, idx] *= 0.5
        inv_low = xp.linalg.inv(low)
        s = _t(inv_low) @ phi @ inv_low
        return (0.5 * (s + _t(s)),)

    return apply_op(low, (x,), backward)


@zero_dim
def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> NDArray:  # noqa: A002
    """Vector and matrix norms; the Frobenius/2-norm of vectors, 1- and inf-norms are
    differentiable, the spectral and nuclear matrix norms give values only."""
    arr = as_array(x)
    vector = axis is not None and (isinstance(axis, int) or len(axis) == 1) or \
        (axis is None and arr.ndim == 1)
    if ord in (None, "fro") or (vector and ord == 2):
        return _nd.sqrt(_nd.sum(_nd.square(arr), axis, keepdims))
    if vector and ord == 1:
        return _nd.sum(_nd.abs(arr), axis, keepdims)
    if vector and ord in (numpy.inf, "inf"):
        return _nd.max(_nd.abs(arr), axis, keepdims)
    value = numpy.linalg.norm(arr.asnumpy(), ord, axis, keepdims)
    return as_array(numpy.asarray(value, arr.dtype), arr)


@zero_dim
def tensorinv(a: Any, ind: int = 2) -> NDArray:
    x = as_array(a)
    rows, cols = x.shape[:ind], x.shape[ind:]
    square = inv(x.reshape((int(numpy.prod(rows)), int(numpy.prod(cols)))))
    return square.reshape(cols + rows)


@zero_dim
def tensorsolve(a: Any, b: Any, axes: Any = None) -> NDArray:
    x, y = as_array(a), as_array(b)
    if axes is not None:
        order = [i for i in range(x.ndim) if i not in axes] + list(axes)
        x = x.transpose(order)
    unknown = x.shape[y.ndim:]
    flat = x.reshape((y.size, int(numpy.prod(unknown))))
    return solve(flat, y.reshape((-1,))).reshape(unknown)


def _values(name: str) -> Any:
    fn = numpy_values(getattr(numpy.linalg, name))
    fn.__doc__ = f"``numpy.linalg.{name}`` (values only, no gradient)."
    return fn


eig, eigh, eigvals, eigvalsh = _values("eig"), _values("eigh"), _values("eigvals"), \
    _values("eigvalsh")
svd, pinv = _values("svd"), _values("pinv")

__all__ = ["cholesky", "det", "eig", "eigh", "eigvals", "eigvalsh", "inv", "norm", "pinv",
           "slogdet", "solve", "svd", "tensorinv", "tensorsolve"]
