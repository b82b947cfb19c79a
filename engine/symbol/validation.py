"""Checking a user's symbol file before anything runs it: :func:`inspect_symbol_json`.

It parses the graph (:func:`.serialization.load_json` checks the structure, the operators
and their attributes against each one's domain), infers every shape from the declared
input shapes with each operator's shape function (no array is allocated: see
:mod:`.shapes`), and summarises the network. The graph may only use operators whose
shapes can be known without running them, and the work is bounded (:class:`Bounds`): any
one node's output or parameter, the elements all nodes compute in one forward pass, and
the time spent. Every failure is a :class:`SymbolFormatError` naming the node or input
(:class:`GraphTooLarge` for a bound).

>>> import engine as mx
>>> net = mx.sym.FullyConnected(mx.sym.var('data'), num_hidden=4, name='fc')
>>> info = inspect_symbol_json(net.tojson(), {'data': (2, 3)})
>>> info['ops'], info['output_shapes'], info['parameter_count']
(['FullyConnected'], [(2, 4)], 16)
>>> big = mx.sym.var('data') + mx.sym.arange(start=0, stop=10**12, name='count')
>>> inspect_symbol_json(big.tojson(), {'data': (1,)})
Traceback (most recent call last):
...
engine.symbol.serialization.GraphTooLarge: node 'count' (arange): its output (1000000000000,) ...
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .generic import BOOKKEEPING, GenericSpec
from .serialization import GraphTooLarge, SymbolFormatError, load_json
from .symbol import ShapeInferenceError, Symbol

MAX_INPUT_ELEMENTS = 1 << 31
MAX_DIMS = 32  # numpy's limit


@dataclass(frozen=True)
class Bounds:
    """What inspecting one graph may cost. ``max_node_elements``: any one node's output or
    parameter (2**28 float32 values are 1 GiB); ``max_total_elements``: the elements every
    node computes in one forward pass together, the work a step would do; ``seconds``: the
    time shape inference may take (None: unbounded)."""

    max_node_elements: int = 1 << 28
    max_total_elements: int = 1 << 32
    seconds: float | None = None


def inspect_symbol_json(text: str, input_shapes: Mapping[str, Sequence[int]],
                        bounds: Bounds | None = None) -> dict[str, Any]:
    """Validate a symbol JSON text for the given input shapes and describe it.

    Returns ``{"ops": sorted operator names, "arg_shapes": {name: shape},
    "aux_shapes": {name: shape}, "output_shapes": [shape, ...], "parameter_count": int,
    "parameter_names": [...], "computed_elements": int}`` where the parameters are the
    arguments that are neither declared inputs nor labels (``*label``), plus the auxiliary
    states, ``parameter_count`` counts their elements and ``computed_elements`` the
    elements of every node's outputs. Raises :class:`SymbolFormatError` for malformed
    JSON, an unknown operator or attribute, an operator without a shape function, a
    cycle, a dangling input, input names the graph does not have, or shapes that do not
    fit; :class:`GraphTooLarge` past ``bounds``.
    """
    if not isinstance(text, str):
        raise SymbolFormatError("symbol JSON must be text")
    return inspect_symbol(load_json(text), input_shapes, bounds)


def inspect_symbol(symbol: Symbol, input_shapes: Mapping[str, Sequence[int]],
                   bounds: Bounds | None = None) -> dict[str, Any]:
    """:func:`inspect_symbol_json` for a Symbol (e.g. a network traced on a variable)."""
    bounds = bounds or Bounds()
    shapes = _checked_input_shapes(input_shapes)
    _check_operators(symbol)
    arguments = symbol.list_arguments()
    unknown = sorted(set(shapes) - set(symbol.list_inputs()))
    if unknown:
        raise SymbolFormatError(f"declared input(s) {unknown} are not arguments of the graph; "
                                f"its arguments are {arguments}")
    meter = _Meter(bounds)
    try:
        arg_shapes, out_shapes, aux_shapes = symbol._infer_shapes_observed(shapes, meter)
    except SymbolFormatError:
        raise
    except ShapeInferenceError as exc:  # kept as the cause: it names the node's problem
        raise SymbolFormatError(f"shape mismatch for the declared input shapes {shapes}: "
                                f"{exc}", node=exc.node) from exc
    except Exception as exc:  # noqa: BLE001 - the graph is user input: any failure is its fault
        raise SymbolFormatError(f"shape mismatch for the declared input shapes {shapes}: "
                                f"{exc}") from None
    aux_names = symbol.list_auxiliary_states()
    missing = [n for n, s in zip(arguments + aux_names, arg_shapes + aux_shapes, strict=True)
               if s is None]
    if missing or any(s is None for s in out_shapes):
        raise SymbolFormatError(f"the declared input shapes {shapes} do not determine the "
                                f"shapes of {missing or 'the outputs'}; declare every data "
                                "input")
    arg_table = {n: _plain(s) for n, s in zip(arguments, arg_shapes, strict=True)}
    aux_table = {n: _plain(s) for n, s in zip(aux_names, aux_shapes, strict=True)}
    learned = [n for n in arg_table if n not in shapes and not n.endswith("label")]
    count = sum(math.prod(arg_table[n]) for n in learned) + \
        sum(math.prod(s) for s in aux_table.values())
    return {
        "ops": sorted({n.op for n in symbol._nodes() if n.op is not None}),
        "arg_shapes": arg_table,
        "aux_shapes": aux_table,
        "output_shapes": [_plain(s) for s in out_shapes],
        "parameter_count": int(count),
        "parameter_names": sorted(learned + list(aux_table)),
        "computed_elements": meter.total,
    }


def _check_operators(symbol: Symbol) -> None:
    """Only operators whose shapes are known without running them, with only the
    attributes they declare."""
    for node in symbol._nodes():
        if node.op is None or not isinstance(node.spec, GenericSpec):
            continue  # a layer's spec names its attributes (checked when parsed)
        accepted = node.spec.accepted_attributes
        if accepted is None:
            raise SymbolFormatError(
                f"node {node.name!r}: operator {node.op!r} has no shape function, so its "
                "shapes cannot be checked without running it; a user's graph may not use "
                "it", node=node.name)
        unknown = sorted(k for k in node.attrs if not k.startswith("__")
                         and k not in BOOKKEEPING and k not in accepted)
        if unknown:
            raise SymbolFormatError(
                f"node {node.name!r}: operator {node.op}: unknown attribute {unknown[0]!r}; "
                f"it takes {sorted(accepted) or 'none'}", node=node.name)


class _Meter:
    """Sees each node's shapes as they are inferred and stops at the first bound passed."""

    def __init__(self, bounds: Bounds) -> None:
        self.bounds = bounds
        self.total = 0
        self.nodes = 0
        self.variables: set[str] = set()
        self.deadline = None if bounds.seconds is None else time.monotonic() + bounds.seconds

    def __call__(self, node: Any, inputs: list[Any], outputs: list[Any]) -> None:
        self.nodes += 1
        for (child, _), shape in zip(node.inputs, inputs, strict=True):
            # a variable (data, a parameter) takes its shape at its first use; an operator's
            # output was measured with its node
            if child.op is None and shape is not None and child.name not in self.variables:
                self.variables.add(child.name)
                self._elements(node, shape, "input")
        self.total += sum(self._elements(node, s, "output") for s in outputs if s is not None)
        if self.total > self.bounds.max_total_elements:
            raise GraphTooLarge(
                f"the graph computes more than {self.bounds.max_total_elements} elements in "
                f"one forward pass ({self.total} by node {node.name!r}, the {self.nodes}th "
                "operator)", node=node.name)
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise GraphTooLarge(f"shape inference took longer than {self.bounds.seconds:g} s "
                                f"(stopped at node {node.name!r}, the {self.nodes}th "
                                "operator)", node=node.name)

    def _elements(self, node: Any, shape: Any, role: str) -> int:
        shape = tuple(int(d) for d in shape)
        where = f"node {node.name!r} ({node.op})"
        if len(shape) > MAX_DIMS or any(d < 1 for d in shape):
            raise SymbolFormatError(f"{where}: its {role} shape {shape} has a dimension below "
                                    f"1 or more than {MAX_DIMS} dimensions", node=node.name)
        count = math.prod(shape)
        if count > self.bounds.max_node_elements:
            raise GraphTooLarge(f"{where}: its {role} {shape} has {count} elements, more than "
                                f"the {self.bounds.max_node_elements} one node may have",
                                node=node.name)
        return count


def check_params(info: Mapping[str, Any], params: Mapping[str, Any], *,
                 allow_missing: bool = False) -> None:
    """Check a params file's arrays (e.g. from ``read_params``) against a graph described by
    :func:`inspect_symbol_json`: each name must be ``arg:<argument>`` / ``aux:<auxiliary
    state>`` (as ``export`` writes them) or the bare name, with the inferred shape; and,
    unless ``allow_missing``, every parameter of the graph must be there (the declared inputs
    and labels are not parameters). Raises :class:`SymbolFormatError` naming the array.

    >>> import engine as mx, numpy
    >>> net = mx.sym.FullyConnected(mx.sym.var('data'), num_hidden=4, name='fc')
    >>> info = inspect_symbol_json(net.tojson(), {'data': (2, 3)})
    >>> check_params(info, {'arg:fc_weight': numpy.zeros((4, 2))}, allow_missing=True)
    Traceback (most recent call last):
    ...
    engine.symbol.serialization.SymbolFormatError: params: 'arg:fc_weight' has shape (4, 2), ...
    """
    args, aux = info["arg_shapes"], info["aux_shapes"]
    found: set[str] = set()
    for key, value in params.items():
        kind, _, bare = key.partition(":") if key.startswith(("arg:", "aux:")) else ("", "", key)
        table = args if kind == "arg" else aux if kind == "aux" else {**args, **aux}
        if bare not in table:
            where = {"arg": "arguments", "aux": "auxiliary states"}.get(kind, "parameters")
            raise SymbolFormatError(f"params: {key!r} is not one of the graph's {where} "
                                    f"({sorted(table)[:8]}...)")
        shape = tuple(int(d) for d in getattr(value, "shape", ()))
        if shape != tuple(table[bare]):
            raise SymbolFormatError(f"params: {key!r} has shape {shape}, the graph needs "
                                    f"{tuple(table[bare])}")
        found.add(bare)
    if not allow_missing:
        needed = set(info.get("parameter_names", ())) - found
        if needed:
            raise SymbolFormatError(f"params: no values for {sorted(needed)[:8]} "
                                    f"({len(needed)} in all)")


def _checked_input_shapes(input_shapes: Mapping[str, Sequence[int]]) -> dict[str, tuple[int, ...]]:
    if not isinstance(input_shapes, Mapping) or not input_shapes:
        raise SymbolFormatError("input_shapes must name at least one input and its shape")
    out: dict[str, tuple[int, ...]] = {}
    for name, shape in input_shapes.items():
        try:
            dims = tuple(int(d) for d in shape)
        except (TypeError, ValueError):
            raise SymbolFormatError(f"input {name!r}: shape {shape!r} is not a list of "
                                    "integers") from None
        if not dims or any(d <= 0 for d in dims) or math.prod(dims) > MAX_INPUT_ELEMENTS:
            raise SymbolFormatError(f"input {name!r}: shape {dims} must have positive "
                                    f"dimensions and at most {MAX_INPUT_ELEMENTS} elements")
        out[str(name)] = dims
    return out


def _plain(shape: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in shape)
