"""``linalg_*`` operators of ``mx.sym`` (MXNet's batched linear algebra on the last two
axes) as private NDArray helpers. Products, triangles and inverses are composed of
differentiable NDArray ops; ``potrf`` and ``gelqf`` are forward-only and refuse backward.

>>> from engine import nd
>>> LINALG['linalg_gemm2'](nd.ones((2, 3)), nd.ones((3, 4)), alpha=2.0).asnumpy()[0, 0].item()
6.0
"""

from __future__ import annotations

from typing import Any

import numpy

from ..ndarray import NDArray, apply_op


def _t(a: NDArray) -> NDArray:
    from ..ndarray.shape_ops import swapaxes

    return swapaxes(a, a.ndim - 2, a.ndim - 1)


def _matmul(a: NDArray, b: NDArray) -> NDArray:
    from ..ndarray.ops import batch_dot, dot

    if a.ndim == 2:
        return dot(a, b)
    lead = a.shape[:-2]
    out = batch_dot(a.reshape((-1,) + a.shape[-2:]), b.reshape((-1,) + b.shape[-2:]))
    return out.reshape(lead + out.shape[-2:])


def _move(a: NDArray, axis: int) -> NDArray:
    """MXNet's ``axis`` names the row axis of the matrices; move it next to the last."""
    from ..ndarray.shape_ops import swapaxes

    axis %= a.ndim
    return a if axis == a.ndim - 2 else swapaxes(a, axis, a.ndim - 2)


def gemm2(A: NDArray, B: NDArray, transpose_a: bool = False,  # noqa: N803
          transpose_b: bool = False, alpha: float = 1.0, axis: int = -2) -> NDArray:
    a, b = _move(A, axis), _move(B, axis)
    out = _matmul(_t(a) if transpose_a else a, _t(b) if transpose_b else b) * alpha
    return _move(out, axis)


def gemm(A: NDArray, B: NDArray, C: NDArray, transpose_a: bool = False,  # noqa: N803
         transpose_b: bool = False, alpha: float = 1.0, beta: float = 1.0,
         axis: int = -2) -> NDArray:
    return gemm2(A, B, transpose_a, transpose_b, alpha, axis) + C * beta


def _tri_mask(a: NDArray, lower: bool, offset: int = 0) -> NDArray:
    xp = a.xp
    n, m = a.shape[-2:]
    mask = xp.tril(xp.ones((n, m), a.dtype), offset) if lower else \
        xp.triu(xp.ones((n, m), a.dtype), offset)
    return NDArray(mask, a._ctx)


def trmm(A: NDArray, B: NDArray, transpose: bool = False, rightside: bool = False,  # noqa: N803
         lower: bool = True, alpha: float = 1.0) -> NDArray:
    tri = A * _tri_mask(A, lower)
    op = _t(tri) if transpose else tri
    return (_matmul(B, op) if rightside else _matmul(op, B)) * alpha


def inverse(A: NDArray) -> NDArray:  # noqa: N803
    xp = A.xp
    out = xp.linalg.inv(A.raw)

    def backward(g: Any) -> tuple[Any]:
        inv_t = xp.swapaxes(out, -1, -2)
        return (-(inv_t @ g @ inv_t),)

    return apply_op(out, (A,), backward)


def trsm(A: NDArray, B: NDArray, transpose: bool = False, rightside: bool = False,  # noqa: N803
         lower: bool = True, alpha: float = 1.0) -> NDArray:
    inv = inverse(A * _tri_mask(A, lower))
    op = _t(inv) if transpose else inv
    return (_matmul(B, op) if rightside else _matmul(op, B)) * alpha


def syrk(A: NDArray, transpose: bool = False, alpha: float = 1.0) -> NDArray:  # noqa: N803
    return (_matmul(_t(A), A) if transpose else _matmul(A, _t(A))) * alpha


def potri(A: NDArray) -> NDArray:  # noqa: N803
    tri = A * _tri_mask(A, True)
    return inverse(_matmul(tri, _t(tri)))


def _no_grad(name: str) -> Any:
    def backward(g: Any) -> Any:
        raise NotImplementedError(f"the gradient of {name} is not implemented in Rudder")

    return backward


def potrf(A: NDArray) -> NDArray:  # noqa: N803
    return apply_op(A.xp.linalg.cholesky(A.raw), (A,), _no_grad("linalg_potrf"))


def gelqf(A: NDArray) -> list[NDArray]:  # noqa: N803
    """``A = L Q`` with orthonormal rows in ``Q``: outputs ``(Q, L)``."""
    xp = A.xp
    q, r = xp.linalg.qr(xp.swapaxes(A.raw, -1, -2))  # LAPACK's Householder signs
    q_t = xp.swapaxes(q, -1, -2)
    l_mat = xp.swapaxes(r, -1, -2)
    return [apply_op(q_t, (A,), _no_grad("linalg_gelqf")),
            apply_op(l_mat, (A,), _no_grad("linalg_gelqf"))]


def det(A: NDArray) -> NDArray:  # noqa: N803
    xp = A.xp
    out = xp.linalg.det(A.raw)
    return apply_op(out, (A,), lambda g: (
        (g * out)[..., None, None] * xp.swapaxes(xp.linalg.inv(A.raw), -1, -2),))


def slogdet(A: NDArray) -> list[NDArray]:  # noqa: N803
    xp = A.xp
    sign, logdet = xp.linalg.slogdet(A.raw)
    log_out = apply_op(logdet, (A,), lambda g: (
        g[..., None, None] * xp.swapaxes(xp.linalg.inv(A.raw), -1, -2),))
    return [NDArray(sign, A._ctx), log_out]


def sumlogdiag(A: NDArray) -> NDArray:  # noqa: N803
    xp = A.xp
    diag = xp.diagonal(A.raw, axis1=-2, axis2=-1)
    out = xp.log(diag).sum(axis=-1)

    def backward(g: Any) -> tuple[Any]:
        full = xp.zeros_like(A.raw)
        idx = xp.arange(diag.shape[-1])
        full[..., idx, idx] = g[..., None] / diag
        return (full,)

    return apply_op(out, (A,), backward)


def extractdiag(A: NDArray, offset: int = 0) -> NDArray:  # noqa: N803
    from .fallback_shape import diag

    return diag(A, offset, A.ndim - 2, A.ndim - 1)


def makediag(A: NDArray, offset: int = 0) -> NDArray:  # noqa: N803
    xp = A.xp
    n = A.shape[-1] + abs(offset)
    idx = numpy.arange(A.shape[-1])
    rows, cols = (idx, idx + offset) if offset >= 0 else (idx - offset, idx)
    out = xp.zeros(A.shape[:-1] + (n, n), dtype=A.dtype)
    out[..., rows, cols] = A.raw
    return apply_op(out, (A,), lambda g: (g[..., rows, cols],))


def _tri_index(n: int, offset: int, lower: bool) -> tuple[Any, Any]:
    """MXNet's packing order: row by row for the lower triangle, column by column (the
    transposed lower packing) for the upper one."""
    if lower:
        return numpy.tril_indices(n, offset)
    rows, cols = numpy.tril_indices(n, -offset)
    return cols, rows


def extracttrian(A: NDArray, offset: int = 0, lower: bool = True) -> NDArray:  # noqa: N803
    xp = A.xp
    rows, cols = _tri_index(A.shape[-1], offset, lower if offset == 0 else offset < 0)
    out = A.raw[..., rows, cols]

    def backward(g: Any) -> tuple[Any]:
        full = xp.zeros_like(A.raw)
        full[..., rows, cols] = g
        return (full,)

    return apply_op(out, (A,), backward)


def maketrian(A: NDArray, offset: int = 0, lower: bool = True) -> NDArray:  # noqa: N803
    xp = A.xp
    count = A.shape[-1]
    size = int((numpy.sqrt(8 * count + 1) - 1) / 2) + abs(offset)
    rows, cols = _tri_index(size, offset, lower if offset == 0 else offset < 0)
    out = xp.zeros(A.shape[:-1] + (size, size), dtype=A.dtype)
    out[..., rows, cols] = A.raw
    return apply_op(out, (A,), lambda g: (g[..., rows, cols],))


LINALG: dict[str, Any] = {
    f"linalg_{fn.__name__}": fn for fn in (
        gemm, gemm2, trmm, trsm, syrk, potrf, potri, gelqf, det, slogdet, inverse,
        sumlogdiag, extractdiag, makediag, extracttrian, maketrian)
}
