"""Operators that pick, gather or place elements by index arrays: take, pick, one_hot,
where, gather_nd, scatter_nd, batch_take, diag, the Sequence* operators and the index
conversions."""

from __future__ import annotations

from typing import Any

from . import Shape, normalize_axis, prod, rule
from .domains import AXIS, BOOL, OPT_DTYPE, REAL, choice, integer, ints


@rule("take", attrs={"axis": AXIS, "mode": choice("clip", "wrap", "raise")}, inputs=(2, 2))
def _take(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    data, indices = shapes
    axis = normalize_axis(p.get("axis", 0), len(data))
    return data[:axis] + indices + data[axis + 1:]


@rule("pick", attrs={"axis": AXIS, "keepdims": BOOL, "mode": choice("clip", "wrap")},
      inputs=(2, 2))
def _pick(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    data, index = shapes
    axis = normalize_axis(p.get("axis", -1), len(data))
    rest = data[:axis] + data[axis + 1:]
    if prod(index) != prod(rest):
        raise ValueError(f"index {index} does not match data {data} without axis {axis}")
    return data[:axis] + ((1,) if p.get("keepdims", False) else ()) + data[axis + 1:]


@rule("one_hot", attrs={"depth": integer(low=1), "on_value": REAL, "off_value": REAL,
                        "dtype": OPT_DTYPE}, required=("depth",))
def _one_hot(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    return shapes[0] + (p["depth"],)


@rule("where", inputs=(3, 3))
def _where(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    cond, x, y = shapes
    if x != y or cond != x:
        raise ValueError(f"condition, x and y must have one shape, got {shapes}")
    return x


@rule("gather_nd", inputs=(2, 2))
def _gather_nd(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    data, indices = shapes
    if not indices or indices[0] > len(data):
        raise ValueError(f"indices {indices} must index at most the {len(data)} axes of data")
    return indices[1:] + data[indices[0]:]


@rule("scatter_nd", attrs={"shape": ints(low=1)}, required=("shape",), inputs=(2, 2))
def _scatter_nd(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    data, indices = shapes
    target = p["shape"]
    if not indices or indices[0] > len(target) or data != indices[1:] + target[indices[0]:]:
        raise ValueError(f"data {data} and indices {indices} do not fit shape {target}")
    return target


@rule("batch_take", inputs=(2, 2))
def _batch_take(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    data, indices = shapes
    if len(data) != 2 or indices != (data[0],):
        raise ValueError(f"expects data (N, k) and indices (N,), got {shapes}")
    return indices


def diagonal_length(rows: int, cols: int, k: int) -> int:
    return max(0, min(rows, cols - k) if k >= 0 else min(rows + k, cols))


@rule("diag", attrs={"k": integer(), "axis1": AXIS, "axis2": AXIS})
def _diag(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    shape, k = shapes[0], p.get("k", 0)
    if len(shape) == 1:
        side = shape[0] + abs(k)
        return (side, side)
    a1, a2 = (normalize_axis(p.get(key, d), len(shape)) for key, d in
              (("axis1", 0), ("axis2", 1)))
    if a1 == a2:
        raise ValueError("axis1 and axis2 must differ")
    rest = tuple(d for i, d in enumerate(shape) if i not in (a1, a2))
    return rest + (diagonal_length(shape[a1], shape[a2], k),)


SEQUENCE = {"use_sequence_length": BOOL, "axis": choice(0, 1), "value": REAL}


def _sequence(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    data, axis = shapes[0], p.get("axis", 0)
    if len(data) < 2:
        raise ValueError(f"expects (time, batch, ...) or (batch, time, ...), got {data}")
    if len(shapes) > 1 and shapes[1] != (data[1 - axis],):
        raise ValueError(f"sequence_length must be (batch,) = ({data[1 - axis]},), got "
                         f"{shapes[1]}")
    return data


@rule("SequenceLast", "sequence_last", attrs=SEQUENCE, inputs=(1, 2))
def _sequence_last(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    data = _sequence(p, shapes)
    axis = p.get("axis", 0)
    return data[:axis] + data[axis + 1:]


rule("SequenceMask", "sequence_mask", attrs=SEQUENCE, inputs=(1, 2))(_sequence)
rule("SequenceReverse", "sequence_reverse", attrs={**SEQUENCE, "axis": choice(0)},
     inputs=(1, 2))(_sequence)


@rule("ravel_multi_index", attrs={"shape": ints(low=1)}, required=("shape",))
def _ravel(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    data = shapes[0]
    if len(data) != 2 or data[0] != len(p["shape"]):
        raise ValueError(f"expects ({len(p['shape'])}, N) indices, got {data}")
    return data[1:]


@rule("unravel_index", attrs={"shape": ints(low=1)}, required=("shape",))
def _unravel(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    return (len(p["shape"]),) + shapes[0]


@rule("softmax_cross_entropy", inputs=(2, 2))
def _softmax_cross_entropy(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    data, label = shapes
    if label != data[:-1]:
        raise ValueError(f"label {label} must be data {data} without its last axis")
    return (1,)
