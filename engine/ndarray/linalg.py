"""``nd.linalg``: MXNet's batched linear algebra on the last two axes (``gemm``, ``potrf``,
``trsm``, ``inverse``, ``det``, ...), each differentiable.

Products are composed from ``batch_dot``; factorizations and solves have their own
backward rules (matrix calculus written in raw arrays).

>>> from engine import nd
>>> a = nd.array([[4.0, 2.0], [2.0, 3.0]])
>>> nd.linalg.potrf(a).asnumpy().astype(float).round(4).tolist()
[[2.0, 0.0], [1.0, 1.4142]]
"""

from __future__ import annotations

from typing import Any

import numpy

from ..base import MXNetError
from .ndarray import NDArray, apply_op
from .ops import batch_dot, reduce_sum, unary

__all__ = ["det", "extractdiag", "extracttrian", "gelqf", "gemm", "gemm2", "inverse",
           "makediag", "maketrian", "potrf", "potri", "slogdet", "sumlogdiag", "syevd", "syrk",
           "trmm", "trsm"]


def _t(x: Any) -> Any:
    return x.swapaxes(-1, -2)


def _check_axis(axis: int) -> None:
    if axis != -2:
        raise MXNetError("linalg: only axis=-2 (matrices on the last two axes) is supported")


def gemm2(A: NDArray, B: NDArray, transpose_a: bool = False,  # noqa: N803
          transpose_b: bool = False, alpha: float = 1.0, axis: int = -2, **_: Any) -> NDArray:
    """``alpha · op(A) · op(B)``."""
    _check_axis(axis)
    out = batch_dot(A, B, transpose_a=transpose_a, transpose_b=transpose_b)
    return out * alpha if alpha != 1.0 else out


def gemm(A: NDArray, B: NDArray, C: NDArray, transpose_a: bool = False,  # noqa: N803
         transpose_b: bool = False, alpha: float = 1.0, beta: float = 1.0, axis: int = -2,
         **_: Any) -> NDArray:
    """``alpha · op(A) · op(B) + beta · C``."""
    return gemm2(A, B, transpose_a, transpose_b, alpha, axis) + C * beta


def syrk(A: NDArray, transpose: bool = False, alpha: float = 1.0, **_: Any) -> NDArray:  # noqa: N803
    """``alpha · A·Aᵀ`` (``alpha · Aᵀ·A`` with ``transpose``)."""
    out = batch_dot(A, A, transpose_a=transpose, transpose_b=not transpose)
    return out * alpha if alpha != 1.0 else out


def _triangle(A: NDArray, lower: bool) -> NDArray:  # noqa: N803
    n = A.shape[-1]
    mask = numpy.tril(numpy.ones((n, n))) if lower else numpy.triu(numpy.ones((n, n)))
    return A * NDArray(A.xp.asarray(mask.astype(A._data.dtype)), A.context)


def trmm(A: NDArray, B: NDArray, transpose: bool = False, rightside: bool = False,  # noqa: N803
         lower: bool = True, alpha: float = 1.0, **_: Any) -> NDArray:
    """``alpha · op(A)·B`` (or ``B·op(A)``) for triangular ``A``."""
    tri = _triangle(A, lower)
    out = (batch_dot(B, tri, transpose_b=transpose) if rightside
           else batch_dot(tri, B, transpose_a=transpose))
    return out * alpha if alpha != 1.0 else out


def inverse(A: NDArray, **_: Any) -> NDArray:  # noqa: N803
    """Matrix inverse; gradient ``−A⁻ᵀ·g·A⁻ᵀ``."""
    xp = A.xp
    inv = xp.linalg.inv(A._data)
    return apply_op(inv, (A,), lambda g: (-_t(inv) @ g @ _t(inv),))


def trsm(A: NDArray, B: NDArray, transpose: bool = False, rightside: bool = False,  # noqa: N803
         lower: bool = True, alpha: float = 1.0, **_: Any) -> NDArray:
    """Solve ``op(A)·X = alpha·B`` (or ``X·op(A) = alpha·B``) for triangular ``A``."""
    inv = inverse(_triangle(A, lower))
    out = (batch_dot(B, inv, transpose_b=transpose) if rightside
           else batch_dot(inv, B, transpose_a=transpose))
    return out * alpha if alpha != 1.0 else out


def potrf(A: NDArray, **_: Any) -> NDArray:  # noqa: N803
    """Cholesky factor ``L`` (lower) with ``A = L·Lᵀ``."""
    xp = A.xp
    try:
        L = xp.linalg.cholesky(A._data)  # noqa: N806
    except numpy.linalg.LinAlgError as err:
        raise MXNetError(f"potrf: matrix is not positive definite ({err})") from err

    def backward(g: Any) -> tuple[Any]:
        # Murray (2016): Ā = ½·L⁻ᵀ·Φ(Lᵀ·L̄)·L⁻¹, symmetrised; Φ keeps the lower triangle
        # and halves the diagonal
        phi = xp.tril(_t(L) @ g)
        phi = phi - 0.5 * xp.eye(L.shape[-1], dtype=L.dtype) * phi
        l_inv = xp.linalg.inv(L)
        s = _t(l_inv) @ phi @ l_inv
        return (0.5 * (s + _t(s)),)

    return apply_op(L, (A,), backward)


def potri(A: NDArray, **_: Any) -> NDArray:  # noqa: N803
    """``(L·Lᵀ)⁻¹`` from a Cholesky factor ``L`` (the inverse of the original matrix)."""
    return inverse(syrk(_triangle(A, True)))


def det(A: NDArray, **_: Any) -> NDArray:  # noqa: N803
    """Determinant; gradient ``g·det·A⁻ᵀ``."""
    xp = A.xp
    out = xp.linalg.det(A._data)
    return apply_op(xp.asarray(out), (A,), lambda g: (
        (g * out)[..., None, None] * _t(xp.linalg.inv(A._data)),))


def slogdet(A: NDArray, **_: Any) -> list[NDArray]:  # noqa: N803
    """``[sign, log|det|]``; the log's gradient is ``g·A⁻ᵀ``."""
    xp = A.xp
    sign, logabs = xp.linalg.slogdet(A._data)
    sign_arr = NDArray(xp.asarray(sign).astype(A._data.dtype), A.context)
    log_arr = apply_op(xp.asarray(logabs).astype(A._data.dtype), (A,), lambda g: (
        g[..., None, None] * _t(xp.linalg.inv(A._data)),))
    return [sign_arr, log_arr]


def extractdiag(A: NDArray, offset: int = 0, **_: Any) -> NDArray:  # noqa: N803
    """The ``offset`` diagonal of each matrix."""
    xp = A.xp
    out = xp.diagonal(A._data, offset, -2, -1).copy()
    shape = A.shape

    def backward(g: Any) -> tuple[Any]:
        full = xp.zeros(shape, dtype=g.dtype)
        rows = xp.arange(g.shape[-1]) + max(-offset, 0)
        full[..., rows, rows + offset] = g
        return (full,)

    return apply_op(out, (A,), backward)


def makediag(A: NDArray, offset: int = 0, **_: Any) -> NDArray:  # noqa: N803
    """Square matrices with ``A``'s last axis on the ``offset`` diagonal."""
    xp = A.xp
    k = A.shape[-1]
    n = k + abs(offset)
    out = xp.zeros(A.shape[:-1] + (n, n), dtype=A._data.dtype)
    rows = xp.arange(k) + max(-offset, 0)
    out[..., rows, rows + offset] = A._data
    return apply_op(out, (A,), lambda g: (g[..., rows, rows + offset],))


def _trian_index(n: int, offset: int, lower: bool) -> tuple[Any, Any]:
    """Row/column indices of a triangle in MXNet's packing order: a lower triangle row by
    row, an upper one column by column (the lower triangle of the transpose)."""
    if offset > 0 or (offset == 0 and not lower):
        cols, rows = numpy.tril_indices(n, -offset)
        return rows, cols
    return numpy.tril_indices(n, offset)


def extracttrian(A: NDArray, offset: int = 0, lower: bool = True, **_: Any) -> NDArray:  # noqa: N803
    """The triangle of each matrix as a vector (packed as MXNet packs it)."""
    xp = A.xp
    rows, cols = (xp.asarray(i) for i in _trian_index(A.shape[-1], offset, lower))
    out = A._data[..., rows, cols]
    shape = A.shape

    def backward(g: Any) -> tuple[Any]:
        full = xp.zeros(shape, dtype=g.dtype)
        full[..., rows, cols] = g
        return (full,)

    return apply_op(out, (A,), backward)


def maketrian(A: NDArray, offset: int = 0, lower: bool = True, **_: Any) -> NDArray:  # noqa: N803
    """Matrices whose triangle is filled from ``A``'s last axis (MXNet's packing)."""
    xp = A.xp
    m = A.shape[-1]
    k = int((numpy.sqrt(8 * m + 1) - 1) / 2)  # triangle of side k has m entries
    n = k + abs(offset)
    rows, cols = (xp.asarray(i) for i in _trian_index(n, offset, lower))
    out = xp.zeros(A.shape[:-1] + (n, n), dtype=A._data.dtype)
    out[..., rows, cols] = A._data
    return apply_op(out, (A,), lambda g: (g[..., rows, cols],))


def sumlogdiag(A: NDArray, **_: Any) -> NDArray:  # noqa: N803
    """``Σ log(diag(A))`` per matrix."""
    return reduce_sum(unary("log", extractdiag(A)), axis=-1)


def gelqf(A: NDArray, **_: Any) -> list[NDArray]:  # noqa: N803
    """LQ factorisation ``A = L·Q`` (``Q`` with orthonormal rows), as ``[Q, L]``.

    Signs follow LAPACK's Householder convention, as MXNet's. The gradient is MXNet's:
    with ``M = Lᵀ·dL - dQ·Qᵀ`` made symmetric from its lower triangle (``S``),
    ``dA = L⁻ᵀ·(dQ + S·Q)``; it is linear in ``(dQ, dL)``, so each output's node carries
    its own share.
    """
    xp = A.xp
    # LAPACK's LQ of A is its Householder QR of Aᵀ, which numpy's qr runs: same signs
    q, r = xp.linalg.qr(_t(A._data))
    q_rows, l_low = _t(q), _t(r)

    def through(d_q: Any, m: Any) -> tuple[Any]:
        lower = xp.tril(m)
        sym = lower + _t(xp.tril(m, -1))
        rhs = sym @ q_rows if d_q is None else d_q + sym @ q_rows
        return (xp.linalg.solve(_t(l_low), rhs).astype(A._data.dtype, copy=False),)

    return [apply_op(q_rows, (A,), lambda g: through(g, -(g @ _t(q_rows)))),
            apply_op(l_low, (A,), lambda g: through(None, _t(l_low) @ g))]


def syevd(A: NDArray, **_: Any) -> list[NDArray]:  # noqa: N803
    """Symmetric eigendecomposition ``A = Uᵀ·diag(L)·U`` as ``[U, L]``: the rows of ``U`` are
    the eigenvectors, ``L`` ascending. Each row's sign makes its largest-magnitude entry
    positive (so the result does not depend on the LAPACK driver's choice).

    >>> from engine import nd
    >>> U, L = nd.linalg.syevd(nd.array([[1.0, 2.0], [2.0, 4.0]]))
    >>> [round(v, 4) for v in L.asnumpy().tolist()]
    [0.0, 5.0]
    """
    xp = A.xp
    lam, vecs = xp.linalg.eigh(A._data)  # columns are eigenvectors
    rows = _t(vecs)
    largest = xp.take_along_axis(rows, xp.abs(rows).argmax(axis=-1)[..., None], axis=-1)
    rows = rows * xp.where(largest < 0, -1, 1).astype(rows.dtype)
    dtype = A._data.dtype
    rows, lam = rows.astype(dtype), lam.astype(dtype)

    def through_vectors(g: Any) -> tuple[Any]:
        # dA = Uᵀ·sym(F ∘ (g·Uᵀ))·U with F[i, j] = 1/(λ_i − λ_j) off the diagonal
        gap = lam[..., :, None] - lam[..., None, :]
        n = lam.shape[-1]
        off = ~xp.eye(n, dtype=bool)
        inv_gap = xp.where(off, 1.0 / xp.where(off, gap, 1.0), 0.0).astype(dtype)
        inner = inv_gap * (g @ _t(rows))
        inner = (inner + _t(inner)) / 2
        return (_t(rows) @ inner @ rows,)

    def through_values(g: Any) -> tuple[Any]:
        return ((_t(rows) * g[..., None, :]) @ rows,)

    return [apply_op(rows, (A,), through_vectors), apply_op(lam, (A,), through_values)]
