"""Reductions: the reduced axes are dropped (or kept as 1 with ``keepdims``); a reduction
to a scalar is ``(1,)``, MXNet's legacy shape for it."""

from __future__ import annotations

from typing import Any

from . import Shape, normalize_axis, prod, rule
from .domains import AXES, BOOL, DTYPE, OPT_AXIS, choice, integer


def reduced(shape: Shape, axes: tuple[int, ...] | None, keepdims: bool) -> Shape:
    """``shape`` reduced over ``axes`` (None: all of them)."""
    if axes is None:
        out: Shape = (1,) * len(shape) if keepdims else ()
    else:
        out = tuple(1 if i in axes else d for i, d in enumerate(shape)
                    if keepdims or i not in axes)
    return out or (1,)


def reduction_axes(axis: Any, ndim: int, exclude: bool = False) -> tuple[int, ...] | None:
    """MXNet's ``axis`` (None, an int or several; () means all) -> sorted axes or None."""
    if axis is None or axis == ():
        return None
    axes = [normalize_axis(a, ndim) for a in ((axis,) if isinstance(axis, int) else axis)]
    if len(set(axes)) != len(axes):
        raise ValueError(f"axis {axis} repeats an axis")
    if exclude:
        return tuple(i for i in range(ndim) if i not in axes)
    return tuple(sorted(axes))


REDUCE = {"axis": AXES, "keepdims": BOOL, "exclude": BOOL}


@rule("sum", "mean", "max", "min", "prod", "nansum", "nanprod", "sum_axis", "max_axis",
      "min_axis", "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", attrs=REDUCE)
def reduce(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    shape = shapes[0]
    axes = reduction_axes(p.get("axis"), len(shape), p.get("exclude", False))
    return reduced(shape, axes, p.get("keepdims", False))


@rule("norm", attrs={"ord": choice(1, 2), "axis": AXES, "keepdims": BOOL})
def _norm(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    return reduce({"axis": p.get("axis"), "keepdims": p.get("keepdims", False)}, shapes)


@rule("argmax", "argmin", attrs={"axis": OPT_AXIS, "keepdims": BOOL})
def _arg_extreme(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    axis = p.get("axis")
    if axis is None:  # the index into the flattened array; keepdims does not apply
        return (1,)
    return reduce({"axis": axis, "keepdims": p.get("keepdims", False)}, shapes)


@rule("argmax_channel")
def _argmax_channel(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    return reduced(shapes[0], (normalize_axis(1, len(shapes[0])),), False)


@rule("moments", attrs={"axes": AXES, "keepdims": BOOL})
def _moments(p: dict[str, Any], shapes: list[Shape]) -> list[Shape]:
    out = reduce({"axis": p.get("axes"), "keepdims": p.get("keepdims", False)}, shapes)
    return [out, out]


@rule("topk", attrs={"axis": OPT_AXIS, "k": integer(), "is_ascend": BOOL, "dtype": DTYPE,
                     "ret_typ": choice("value", "indices", "mask", "both")})
def _topk(p: dict[str, Any], shapes: list[Shape]) -> Shape | list[Shape]:
    shape, axis, kind = shapes[0], p.get("axis", -1), p.get("ret_typ", "indices")
    if axis is None:  # over the flattened array
        shape, axis = (prod(shape),), 0
    axis = normalize_axis(axis, len(shape))
    if kind == "mask":
        return shapes[0]
    k = p.get("k", 1)
    # k < 1 means every element (MXNet); more than the axis holds gives all it holds
    k = shape[axis] if k < 1 else min(k, shape[axis])
    out = shape[:axis] + (k,) + shape[axis + 1:]
    return [out, out] if kind == "both" else out

