"""Shape-changing operators of symbol graphs: ``Flatten``, ``Reshape`` (every MXNet
reshape code, resolved here) and ``Concat``.

>>> reshape_target((2, 3, 4), (-4, 1, 2, -2))
(1, 2, 3, 4)
"""

from __future__ import annotations

from typing import Any

from ..ndarray import shape_ops
from .ops import _REQUIRED, OpSpec, Shape, _bool, _op, _prod, _tuple


def _flatten_infer(p: dict[str, Any], shapes: list[Shape | None]):
    data = shapes[0]
    return shapes, None if data is None else (data[0], _prod(data[1:]))


_op(OpSpec("Flatten", ("data",), {}, _flatten_infer,
           lambda p, x: x[0].reshape((x[0].shape[0], -1))))


def reshape_target(src: Shape, codes: Shape, reverse: bool = False) -> Shape:
    """MXNet's reshape codes resolved against ``src``: 0 copies a dimension, -1 infers
    one, -2 copies the rest, -3 merges two, -4 splits one into the next two codes;
    ``reverse`` applies them from the right."""
    # the codes are resolved by engine.nd's reshape (one implementation of the rules); only
    # the -1 left for the array's reshape is made concrete here, for shape inference
    out = list(shape_ops._mxnet_shape(tuple(src), codes, reverse))
    if -1 in out:
        known = _prod(tuple(d for d in out if d != -1))
        out[out.index(-1)] = _prod(src) // max(known, 1)
    if _prod(tuple(out)) != _prod(src):
        raise ValueError(f"Reshape: cannot reshape {src} with shape={codes}")
    return tuple(out)


def _reshape_infer(p: dict[str, Any], shapes: list[Shape | None]):
    data = shapes[0]
    if data is None:
        return shapes, None
    return shapes, reshape_target(tuple(data), p["shape"], p["reverse"])


_op(OpSpec("Reshape", ("data",),
           {"shape": (_tuple, _REQUIRED), "reverse": (_bool, False),
            "target_shape": (_tuple, ()), "keep_highest": (_bool, False)},
           _reshape_infer,
           lambda p, x: x[0].reshape(reshape_target(x[0].shape, p["shape"], p["reverse"]))))


# ---- Concat
def _concat_infer(p: dict[str, Any], shapes: list[Shape | None]):
    if any(s is None for s in shapes):
        return shapes, None
    dim = p["dim"] % len(shapes[0])  # type: ignore[arg-type]
    first = list(shapes[0])  # type: ignore[arg-type]
    first[dim] = sum(s[dim] for s in shapes)  # type: ignore[index]
    return shapes, tuple(first)


_op(OpSpec("Concat", (), {"dim": (int, 1), "num_args": (int, 0)}, _concat_infer,
           lambda p, x: shape_ops.concat(list(x), axis=p["dim"]), variadic=True))
