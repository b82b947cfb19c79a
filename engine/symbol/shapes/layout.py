"""Operators that move, repeat, cut or join axes: reshape, transpose, tile, slice,
concat, split and their relatives."""

from __future__ import annotations

import builtins
from typing import Any

from . import Shape, normalize_axis, prod, rule
from .domains import AXES, AXIS, BOOL, OPT_AXIS, SHAPE, integer, ints, optional, slice_bounds


@rule("reshape", attrs={"shape": ints(), "reverse": BOOL, "target_shape": ints(),
                        "keep_highest": BOOL}, required=("shape",))
def _reshape(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    from ..reshape_ops import reshape_target

    return reshape_target(shapes[0], p["shape"], p.get("reverse", False))


@rule("flatten")
def _flatten(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    shape = shapes[0]
    return (shape[0], prod(shape[1:])) if shape else (1, 1)


@rule("expand_dims", attrs={"axis": AXIS}, required=("axis",))
def _expand_dims(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    shape = shapes[0]
    axis = normalize_axis(p["axis"], len(shape) + 1)
    return shape[:axis] + (1,) + shape[axis:]


@rule("squeeze", attrs={"axis": AXES})
def _squeeze(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    shape, axis = shapes[0], p.get("axis")
    if axis is None:
        drop = {i for i, d in enumerate(shape) if d == 1}
    else:
        drop = {normalize_axis(a, len(shape)) for a in ((axis,) if isinstance(axis, int)
                                                        else axis)}
        if any(shape[a] != 1 for a in drop):
            raise ValueError(f"cannot squeeze axes {sorted(drop)} of shape {shape}: not 1")
    return tuple(d for i, d in enumerate(shape) if i not in drop) or (1,)


def _permuted(shape: Shape, axes: tuple[int, ...]) -> Shape:
    if sorted(a % len(shape) for a in axes) != list(range(len(shape))) or any(
            not -len(shape) <= a < len(shape) for a in axes):
        raise ValueError(f"axes {axes} are not a permutation of {len(shape)} axes")
    return tuple(shape[a] for a in axes)


@rule("transpose", attrs={"axes": ints()})
def _transpose(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    axes = p.get("axes") or tuple(reversed(range(len(shapes[0]))))
    return _permuted(shapes[0], axes)


@rule("swapaxes", "SwapAxis", attrs={"dim1": AXIS, "dim2": AXIS}, required=("dim1", "dim2"))
def _swapaxes(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    out = list(shapes[0])
    a, b = (normalize_axis(p[k], len(out)) for k in ("dim1", "dim2"))
    out[a], out[b] = out[b], out[a]
    return tuple(out)


@rule("moveaxis", attrs={"source": ints(), "destination": ints()},
      required=("source", "destination"))
def _moveaxis(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    shape = shapes[0]
    src = [normalize_axis(a, len(shape)) for a in p["source"]]
    dst = [normalize_axis(a, len(shape)) for a in p["destination"]]
    if len(src) != len(dst) or len(set(src)) != len(src):
        raise ValueError("source and destination must name as many distinct axes")
    order = [a for a in range(len(shape)) if a not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return tuple(shape[a] for a in order)


@rule("flip", "reverse", attrs={"axis": ints()}, required=("axis",))
def _flip(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    for axis in p["axis"]:
        normalize_axis(axis, len(shapes[0]))
    return shapes[0]


@rule("tile", attrs={"reps": ints(low=0)}, required=("reps",))
def _tile(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    shape, reps = shapes[0], p["reps"]
    ndim = max(len(shape), len(reps))
    shape = (1,) * (ndim - len(shape)) + shape
    reps = (1,) * (ndim - len(reps)) + reps
    return tuple(d * r for d, r in zip(shape, reps, strict=True))


@rule("repeat", attrs={"repeats": integer(low=0), "axis": OPT_AXIS}, required=("repeats",))
def _repeat(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    shape, axis = shapes[0], p.get("axis")
    if axis is None:
        return (prod(shape) * p["repeats"],)
    axis = normalize_axis(axis, len(shape))
    return shape[:axis] + (shape[axis] * p["repeats"],) + shape[axis + 1:]


@rule("broadcast_to", attrs={"shape": SHAPE}, required=("shape",))
def _broadcast_to(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    shape, wanted = shapes[0], p["shape"]
    # 0 keeps the input's size (MXNet); the rest follow numpy's rule
    target = tuple(shape[i] if d == 0 and i < len(shape) else d for i, d in enumerate(wanted))
    _check_broadcast(shape, target)
    return target


def _check_broadcast(shape: Shape, target: Shape) -> None:
    if len(shape) > len(target) or any(
            d not in (1, t) for d, t in zip(reversed(shape), reversed(target), strict=False)):
        raise ValueError(f"cannot broadcast {shape} to {target}")


@rule("broadcast_axis", "broadcast_axes", attrs={"axis": ints(), "size": ints(low=0)})
def _broadcast_axis(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    out = list(shapes[0])
    axes, sizes = p.get("axis", ()), p.get("size", ())
    if len(axes) != len(sizes):
        raise ValueError(f"axis {axes} and size {sizes} differ in length")
    for axis, size in zip(axes, sizes, strict=True):
        axis = normalize_axis(axis, len(out))
        if out[axis] != 1:
            raise ValueError(f"axis {axis} has size {out[axis]}, not 1")
        out[axis] = size
    return tuple(out)


@rule("broadcast_like", attrs={"lhs_axes": AXES, "rhs_axes": AXES}, inputs=(2, 2))
def _broadcast_like(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    lhs, rhs = shapes
    lhs_axes, rhs_axes = p.get("lhs_axes"), p.get("rhs_axes")
    if lhs_axes is None or rhs_axes is None:
        _check_broadcast(lhs, rhs)
        return rhs
    out = list(lhs)
    for a, b in zip(lhs_axes, rhs_axes, strict=True):
        out[normalize_axis(a, len(lhs))] = rhs[normalize_axis(b, len(rhs))]
    _check_broadcast(lhs, tuple(out))
    return tuple(out)


OPT_INT = optional(integer())


@rule("reshape_like", attrs={"lhs_begin": OPT_INT, "lhs_end": OPT_INT, "rhs_begin": OPT_INT,
                             "rhs_end": OPT_INT}, inputs=(2, 2))
def _reshape_like(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    lhs, rhs = shapes

    def bounds(shape: Shape, begin: int | None, end: int | None) -> tuple[int, int]:
        return begin or 0, len(shape) if end is None else end % (len(shape) + 1)

    lb, le = bounds(lhs, p.get("lhs_begin"), p.get("lhs_end"))
    rb, re = bounds(rhs, p.get("rhs_begin"), p.get("rhs_end"))
    target = lhs[:lb] + rhs[rb:re] + lhs[le:]
    if prod(target) != prod(lhs):
        raise ValueError(f"cannot reshape {lhs} into {target}")
    return target


def sliced(shape: Shape, begin: tuple[int | None, ...], end: tuple[int | None, ...],
           step: tuple[int | None, ...]) -> Shape:
    """Python's slicing rules per axis (the rest kept whole)."""
    if len(begin) != len(end) or (step and len(step) != len(begin)) or len(begin) > len(shape):
        raise ValueError(f"begin {begin}, end {end} and step {step} must have one entry per "
                         f"sliced axis (at most {len(shape)})")
    out = list(shape)
    for axis, (b, e) in enumerate(zip(begin, end, strict=True)):
        s = step[axis] if step else None
        if s == 0:
            raise ValueError("step cannot be 0")
        out[axis] = len(builtins.range(*builtins.slice(b, e, s).indices(shape[axis])))
    return tuple(out)


@rule("slice", "crop", attrs={"begin": slice_bounds, "end": slice_bounds,
                              "step": slice_bounds}, required=("begin", "end"))
def _slice(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    return sliced(shapes[0], p["begin"], p["end"], p.get("step", ()))


@rule("slice_axis", attrs={"axis": AXIS, "begin": integer(), "end": OPT_INT},
      required=("axis", "begin", "end"))
def _slice_axis(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    shape = shapes[0]
    axis = normalize_axis(p["axis"], len(shape))
    size = len(builtins.range(*builtins.slice(p["begin"], p["end"]).indices(shape[axis])))
    return shape[:axis] + (size,) + shape[axis + 1:]


@rule("slice_like", attrs={"axes": ints()}, inputs=(2, 2))
def _slice_like(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    data, like = shapes
    axes = p.get("axes") or tuple(range(min(len(data), len(like))))
    out = list(data)
    for axis in axes:
        axis = normalize_axis(axis, len(data))
        if axis >= len(like) or like[axis] > data[axis]:
            raise ValueError(f"shape_like {like} does not fit axis {axis} of {data}")
        out[axis] = like[axis]
    return tuple(out)


@rule("concat", attrs={"dim": AXIS, "axis": OPT_AXIS}, inputs=(1, None))
def _concat(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    axis = p.get("axis")
    axis = normalize_axis(p.get("dim", 1) if axis is None else axis, len(shapes[0]))
    for shape in shapes:
        if len(shape) != len(shapes[0]) or any(
                d != e for i, (d, e) in enumerate(zip(shape, shapes[0], strict=True))
                if i != axis):
            raise ValueError(f"shapes {shapes} differ outside the concatenated axis {axis}")
    first = shapes[0]
    return first[:axis] + (sum(s[axis] for s in shapes),) + first[axis + 1:]


@rule("stack", attrs={"axis": AXIS}, inputs=(1, None))
def _stack(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    if any(s != shapes[0] for s in shapes):
        raise ValueError(f"every input must have the same shape, got {shapes}")
    axis = normalize_axis(p.get("axis", 0), len(shapes[0]) + 1)
    return shapes[0][:axis] + (len(shapes),) + shapes[0][axis:]


@rule("split", "SliceChannel", attrs={"num_outputs": integer(low=1), "axis": AXIS,
                                      "squeeze_axis": BOOL}, required=("num_outputs",))
def _split(p: dict[str, Any], shapes: list[Shape]) -> list[Shape]:
    shape, count = shapes[0], p["num_outputs"]
    axis = normalize_axis(p.get("axis", 1), len(shape))
    if shape[axis] % count:
        raise ValueError(f"axis {axis} of length {shape[axis]} is not divisible by {count}")
    return [_part(shape, axis, shape[axis] // count, p.get("squeeze_axis", False))] * count


def _part(shape: Shape, axis: int, size: int, squeeze: bool) -> Shape:
    if squeeze and size == 1:
        return shape[:axis] + shape[axis + 1:]
    return shape[:axis] + (size,) + shape[axis + 1:]


@rule("split_v2", attrs={"indices_or_sections": ints(), "axis": AXIS, "squeeze_axis": BOOL},
      required=("indices_or_sections",))
def _split_v2(p: dict[str, Any], shapes: list[Shape]) -> list[Shape]:
    shape, cuts = shapes[0], p["indices_or_sections"]
    axis = normalize_axis(p.get("axis", 0), len(shape))
    squeeze = p.get("squeeze_axis", False)
    if len(cuts) == 1:  # a number of equal sections
        return _split({"num_outputs": cuts[0], "axis": axis, "squeeze_axis": squeeze}, shapes)
    bounds = [0, *cuts, shape[axis]]
    return [_part(shape, axis, len(builtins.range(shape[axis])[lo:hi]), squeeze)
            for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


BLOCK = {"block_size": integer(low=1)}


def _nchw(shapes: list[Shape]) -> Shape:
    if len(shapes[0]) != 4:
        raise ValueError(f"expects (N, C, H, W), got {shapes[0]}")
    return shapes[0]


@rule("depth_to_space", attrs=BLOCK, required=("block_size",))
def _depth_to_space(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    (n, c, h, w), b = _nchw(shapes), p["block_size"]
    if c % (b * b):
        raise ValueError(f"channels {c} are not divisible by {b * b}")
    return (n, c // (b * b), h * b, w * b)


@rule("space_to_depth", attrs=BLOCK, required=("block_size",))
def _space_to_depth(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    (n, c, h, w), b = _nchw(shapes), p["block_size"]
    if h % b or w % b:
        raise ValueError(f"{h}x{w} is not divisible by the block {b}")
    return (n, c * b * b, h // b, w // b)


@rule("shape_array")
def _shape_array(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    return (len(shapes[0]),)


@rule("size_array")
def _size_array(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    return (1,)

