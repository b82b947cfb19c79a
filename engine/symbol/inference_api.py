"""``Symbol.infer_shape``/``infer_type`` and their ``_partial`` forms: MXNet's calling
conventions around :func:`.inference.solve`.

Known values come by position (in ``list_arguments()`` order) or by name, not both;
a shape must be a tuple. In MXNet's legacy shape mode a size of 0 means "unknown" and an
unknown shape reads ``()``; under ``mx.np_shape()`` they are -1 and ``None`` (0 is a real
size). Variables declared with ``shape=``/``dtype=`` start from those.

>>> import engine as mx
>>> a = mx.sym.var('a', shape=(0, 10))
>>> b = mx.sym.var('b', shape=(12, 0))
>>> (a + b).infer_shape()[0]
[(12, 10), (12, 10)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy

from ..base import MXNetError, MXNetShapeError
from ..util import is_np_shape
from . import shape_rules, type_rules
from .inference import InferenceError, solve
from .ops import _tuple, dtype_of_flag

Partial = tuple[int, ...] | None


def _given(symbol: Any, args: Sequence[Any], kwargs: Mapping[str, Any], what: str,
           check: Any) -> dict[str, Any]:
    """The known values by name, each passed through ``check(name, value)``."""
    if args and kwargs:
        raise ValueError(f"Can only specify known argument {what} either by positional or "
                         "kwargs way.")
    if args:
        names = symbol.list_arguments()
        if len(args) > len(names):
            raise ValueError(f"{len(args)} {what} given for the {len(names)} arguments {names}")
        pairs = [(n, v) for n, v in zip(names, args, strict=False) if v is not None]
    else:
        inputs = set(symbol.list_inputs())
        unknown = [k for k in kwargs if k not in inputs]
        if unknown:
            raise MXNetShapeError(f"infer_{what[:-1]}: {unknown} are not inputs of this symbol; "
                             f"its inputs are {sorted(inputs)}")
        pairs = list(kwargs.items())
    return {name: check(name, value) for name, value in pairs}


def _user_shape(name: str, value: Any) -> Partial:
    if not isinstance(value, tuple):
        raise TypeError(f"Arguments need to be shapes (tuple), but '{name}' is "
                        f"{type(value)}.")
    return _from_user(tuple(int(d) for d in value))


def _from_user(shape: tuple[int, ...]) -> Partial:
    """A shape in the user's convention, internally (None, -1 for unknown sizes)."""
    if is_np_shape():
        return shape
    if shape == ():
        return None
    return tuple(shape_rules.UNKNOWN if d == 0 else d for d in shape)


def _to_user(shape: Partial) -> Any:
    if is_np_shape():
        return shape
    if shape is None:
        return ()
    return tuple(0 if d == shape_rules.UNKNOWN else d for d in shape)


def infer_shapes(symbol: Any, args: Sequence[Any], kwargs: Mapping[str, Any],
                 literal: bool = False, observe: Any = None
                 ) -> tuple[list[Partial], list[Partial], list[Partial]]:
    """Partial shapes of the arguments, outputs and auxiliary states. ``literal`` takes the
    given shapes as real sizes (the engine's own callers) instead of the user's convention
    and reports a contradiction as ``ShapeInferenceError`` naming the node; ``observe`` is
    :func:`.inference.solve`'s."""
    return _split(symbol, _solve_shapes(symbol, args, kwargs, literal, observe))


def resolved_creation_nodes(symbol: Any, nodes: list[Any],
                            shapes: Mapping[str, tuple[int, ...]]) -> dict[int, Any]:
    """For creation nodes whose ``shape`` has sizes to infer (``zeros(shape=(0, 100))``),
    copies with the sizes the bound inputs' shapes give, by the original node's id."""
    from .symbol import _Node

    values = _solve_shapes(symbol, (), shapes, literal=True)
    resolved = {}
    for node in nodes:
        shape = values[(id(node), 0)]
        if shape is None or shape_rules.UNKNOWN in shape:
            raise MXNetShapeError(f"{node.op} {node.name!r}: the inputs' shapes "
                                  f"{dict(shapes)} do not determine its shape {shape}")
        attrs = {**node.attrs, "shape": str(tuple(shape))}
        resolved[id(node)] = _Node(node.op, node.name, attrs, node.inputs)
    return resolved


def _solve_shapes(symbol: Any, args: Sequence[Any], kwargs: Mapping[str, Any],
                  literal: bool, observe: Any = None) -> dict[tuple[int, int], Partial]:
    check = (lambda name, value: tuple(value)) if literal else _user_shape
    given = _given(symbol, args, kwargs, "shapes", check)
    start: dict[str, Partial] = {}
    for node in symbol._nodes():
        if node.op is None and "__shape__" in node.attrs:
            start[node.name] = _from_user(_tuple(node.attrs["__shape__"]))
    start.update(given)
    try:
        return solve(symbol, start, shape_rules.refine, shape_rules.merge, "shape",
                     observe=observe, complete=shape_rules.known)
    except InferenceError as exc:
        if literal:
            from .symbol import ShapeInferenceError

            raise ShapeInferenceError(str(exc), exc.node.name) from None
        raise MXNetShapeError(str(exc)) from None


def shape_report(result: tuple[list[Partial], ...]) -> tuple[list[Any], list[Any], list[Any]]:
    """Internal partial shapes in the user's convention."""
    arg, out, aux = result
    return [_to_user(s) for s in arg], [_to_user(s) for s in out], [_to_user(s) for s in aux]


def _user_dtype(name: str, value: Any) -> numpy.dtype:
    return numpy.dtype(value)


def infer_types(symbol: Any, args: Sequence[Any], kwargs: Mapping[str, Any]
                ) -> tuple[list[Any], list[Any], list[Any]]:
    """Numpy type classes of the arguments, outputs and auxiliary states (None: unknown)."""
    given = _given(symbol, args, kwargs, "types", _user_dtype)
    start: dict[str, Any] = {}
    for node in symbol._nodes():
        if node.op is None and "__dtype__" in node.attrs:
            start[node.name] = dtype_of_flag(node.attrs["__dtype__"])
    start.update(given)
    try:
        values = solve(symbol, start, type_rules.refine, type_rules.merge, "dtype")
    except InferenceError as exc:
        raise MXNetError(str(exc)) from None
    arg, out, aux = _split(symbol, values)

    def as_type(dtype: Any) -> Any:
        return None if dtype is None else dtype.type

    return [as_type(t) for t in arg], [as_type(t) for t in out], [as_type(t) for t in aux]


def _split(symbol: Any, values: dict[tuple[int, int], Any]) -> tuple[list[Any], list[Any],
                                                                     list[Any]]:
    by_name = {n.name: values[(id(n), 0)] for n in symbol._nodes() if n.op is None}
    return ([by_name[n] for n in symbol.list_arguments()],
            [values.get((id(node), index)) for node, index in symbol._outputs],
            [by_name[n] for n in symbol.list_auxiliary_states()])
