"""Checking a user's symbol file before anything runs it: :func:`inspect_symbol_json`.

It parses the graph (:func:`.serialization.load_json` checks the structure, the operators
and their attributes), infers every shape from the declared input shapes, and summarises
the network. Every failure is a :class:`SymbolFormatError` naming the node or input.

>>> import engine as mx
>>> net = mx.sym.FullyConnected(mx.sym.var('data'), num_hidden=4, name='fc')
>>> info = inspect_symbol_json(net.tojson(), {'data': (2, 3)})
>>> info['ops'], info['output_shapes'], info['parameter_count']
(['FullyConnected'], [(2, 4)], 16)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .serialization import SymbolFormatError, load_json

MAX_INPUT_ELEMENTS = 1 << 31


def inspect_symbol_json(text: str, input_shapes: Mapping[str, Sequence[int]]) -> dict[str, Any]:
    """Validate a symbol JSON text for the given input shapes and describe it.

    Returns ``{"ops": sorted operator names, "arg_shapes": {name: shape},
    "aux_shapes": {name: shape}, "output_shapes": [shape, ...], "parameter_count": int,
    "parameter_names": [...]}`` where the parameters are the arguments that are neither
    declared inputs nor labels (``*label``), plus the auxiliary states, and
    ``parameter_count`` counts their elements. Raises
    :class:`SymbolFormatError` for malformed JSON, an unknown operator, a cycle, a dangling
    input, input names the graph does not have, or shapes that do not fit.
    """
    if not isinstance(text, str):
        raise SymbolFormatError("symbol JSON must be text")
    symbol = load_json(text)
    shapes = _checked_input_shapes(input_shapes)
    arguments = symbol.list_arguments()
    unknown = sorted(set(shapes) - set(arguments))
    if unknown:
        raise SymbolFormatError(f"declared input(s) {unknown} are not arguments of the graph; "
                                f"its arguments are {arguments}")
    try:
        arg_shapes, out_shapes, aux_shapes = symbol._infer_shapes(**shapes)
    except SymbolFormatError:
        raise
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
    }


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
