"""Products and matrix functions: dot, batch_dot, khatri_rao and the ``linalg_*``
operators (batched over leading axes)."""

from __future__ import annotations

from typing import Any

from . import Shape, rule
from .domains import BOOL, INT, REAL, integer
from .indexing import diagonal_length

TRANSPOSES = {"transpose_a": BOOL, "transpose_b": BOOL}


@rule("dot", attrs=TRANSPOSES, inputs=(2, 2))
def _dot(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    """MXNet's dot contracts lhs's last axis with rhs's first; a transpose reverses every
    axis of its operand."""
    lhs, rhs = shapes
    lhs = lhs[::-1] if p.get("transpose_a", False) else lhs
    rhs = rhs[::-1] if p.get("transpose_b", False) else rhs
    if not lhs or not rhs:
        return lhs or rhs
    if lhs[-1] != rhs[0]:
        raise ValueError(f"lhs {lhs}'s last axis does not match rhs {rhs}'s first")
    return lhs[:-1] + rhs[1:]


def _matrices(shape: Shape, what: str) -> Shape:
    if len(shape) < 2:
        raise ValueError(f"{what} must have at least 2 axes, got {shape}")
    return shape


def _swap_last(shape: Shape, swap: bool) -> Shape:
    return shape[:-2] + (shape[-1], shape[-2]) if swap else shape


def _product(lhs: Shape, rhs: Shape) -> Shape:
    if lhs[:-2] != rhs[:-2] or lhs[-1] != rhs[-2]:
        raise ValueError(f"cannot multiply {lhs} by {rhs}")
    return lhs[:-1] + rhs[-1:]


@rule("batch_dot", attrs=TRANSPOSES, inputs=(2, 2))
def _batch_dot(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    lhs, rhs = (_matrices(s, w) for s, w in zip(shapes, ("lhs", "rhs"), strict=True))
    return _product(_swap_last(lhs, p.get("transpose_a", False)),
                    _swap_last(rhs, p.get("transpose_b", False)))


@rule("khatri_rao", inputs=(1, None))
def _khatri_rao(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    if any(len(s) != 2 or s[1] != shapes[0][1] for s in shapes):
        raise ValueError(f"every input must be a matrix with the same columns, got {shapes}")
    rows = 1
    for shape in shapes:
        rows *= shape[0]
    return (rows, shapes[0][1])


GEMM = {**TRANSPOSES, "alpha": REAL, "axis": INT}


def _gemm2(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    lhs, rhs = (_matrices(s, w) for s, w in zip(shapes[:2], ("A", "B"), strict=True))
    if p.get("axis", -2) not in (-2, len(lhs) - 2):
        raise ValueError("only axis -2 (the rows of each matrix) is supported")
    return _product(_swap_last(lhs, p.get("transpose_a", False)),
                    _swap_last(rhs, p.get("transpose_b", False)))


rule("linalg_gemm2", attrs=GEMM, inputs=(2, 2))(_gemm2)


@rule("linalg_gemm", attrs={**GEMM, "beta": REAL}, inputs=(3, 3))
def _gemm(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    out = _gemm2(p, shapes[:2])
    if shapes[2] != out:
        raise ValueError(f"C must have the product's shape {out}, got {shapes[2]}")
    return out


def _square(shape: Shape) -> Shape:
    if len(_matrices(shape, "A")) and shape[-1] != shape[-2]:
        raise ValueError(f"A must hold square matrices, got {shape}")
    return shape


@rule("linalg_potrf", "linalg_potri", "linalg_inverse")
def _same_square(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    return _square(shapes[0])


@rule("linalg_det", "linalg_sumlogdiag")
def _per_matrix(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    return _square(shapes[0])[:-2] or (1,)


TRIANGULAR = {"transpose": BOOL, "rightside": BOOL, "lower": BOOL, "alpha": REAL}


@rule("linalg_trmm", "linalg_trsm", attrs=TRIANGULAR, inputs=(2, 2))
def _triangular(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    a, b = _square(shapes[0]), _matrices(shapes[1], "B")
    side = b[-1] if p.get("rightside", False) else b[-2]
    if a[:-2] != b[:-2] or a[-1] != side:
        raise ValueError(f"A {a} does not fit B {b}")
    return b


@rule("linalg_syrk", attrs={"transpose": BOOL, "alpha": REAL})
def _syrk(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    a = _matrices(shapes[0], "A")
    side = a[-1] if p.get("transpose", False) else a[-2]
    return a[:-2] + (side, side)


@rule("linalg_extractdiag", attrs={"offset": integer()})
def _extractdiag(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    a = _matrices(shapes[0], "A")
    return a[:-2] + (diagonal_length(a[-2], a[-1], p.get("offset", 0)),)


@rule("linalg_makediag", attrs={"offset": integer()})
def _makediag(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    a = shapes[0]
    side = a[-1] + abs(p.get("offset", 0))
    return a[:-1] + (side, side)
