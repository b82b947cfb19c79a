"""Whole-graph inference of a per-output attribute (shape or dtype), as MXNet infers them.

MXNet does not only push what the inputs say forward: each operator may also fill in its
inputs from what its outputs must be, and the passes repeat (forward, then backward) until
nothing changes. ``a + b`` with ``a`` of shape ``(0, 10)`` and ``b`` of shape ``(12, 0)``
gives both ``(12, 10)``; a convolution whose output is added to a known array learns its
batch size from that array. Values are *partial*: an attribute may be unknown (``None``)
or, for shapes, have unknown dimensions. :func:`solve` runs the passes over a graph with a
``refine`` rule per operator and a ``merge`` that combines two partial values or raises
:class:`Conflict` when they contradict each other.

The rules themselves are in :mod:`.shape_rules` and :mod:`.type_rules`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Entry = tuple[int, int]  # (id of the node, output index)
Refine = Callable[[Any, list[Any], list[Any]], tuple[list[Any], list[Any]]]
Merge = Callable[[Any, Any], Any]
Observe = Callable[[Any, list[Any], list[Any]], None]


class Conflict(Exception):
    """Two partial values of one graph entry contradict each other."""

    def __init__(self, old: Any, new: Any) -> None:
        super().__init__(old, new)
        self.old, self.new = old, new


class RuleError(Exception):
    """An operator's own check failed (shapes that do not fit it)."""


class InferenceError(Exception):
    """An operator's rule failed or contradicted a value; ``node`` names the operator."""

    def __init__(self, node: Any, message: str) -> None:
        super().__init__(f"{node.op} {node.name!r}: {message}")
        self.node = node


def solve(symbol: Any, variables: Mapping[str, Any], refine: Refine, merge: Merge,
          kind: str, max_rounds: int = 64, observe: Observe | None = None,
          complete: Callable[[Any], bool] = lambda value: value is not None
          ) -> dict[Entry, Any]:
    """The value of every visible output of every node (variables included), partial
    where the graph does not determine it. ``variables`` gives the known values by name;
    ``kind`` names the attribute in error messages. ``observe(node, inputs, outputs)`` is
    called once per operator, the first time all its outputs are ``complete``: in the
    first sweep that is in topological order, before the next operator is refined, so
    an observer that raises (a size bound) stops the work there."""
    nodes = symbol._nodes()
    values: dict[Entry, Any] = {}
    operators = []
    for node in nodes:
        if node.op is None:
            values[(id(node), 0)] = variables.get(node.name)
        else:
            operators.append(node)
            for index in range(node.visible_outputs()):
                values[(id(node), index)] = None
    seen: dict[int, tuple[Any, ...]] = {}  # what each node last saw: unchanged means no work
    observed: set[int] = set()
    sweep = operators + operators[::-1]
    for _ in range(max_rounds):
        changed = False
        for node in sweep:
            changed |= _visit(node, values, refine, merge, seen, kind)
            if observe is not None and id(node) not in observed:
                outs = [values[(id(node), i)] for i in range(node.visible_outputs())]
                if all(complete(v) for v in outs):
                    observed.add(id(node))
                    observe(node, [values[(id(c), i)] for c, i in node.inputs], outs)
        if not changed:
            break
    return values


def _visit(node: Any, values: dict[Entry, Any], refine: Refine, merge: Merge,
           seen: dict[int, tuple[Any, ...]], kind: str) -> bool:
    in_keys = [(id(child), index) for child, index in node.inputs]
    out_keys = [(id(node), index) for index in range(node.visible_outputs())]
    ins = [values[key] for key in in_keys]
    outs = [values[key] for key in out_keys]
    state = (tuple(ins), tuple(outs))
    if seen.get(id(node)) == state:
        return False
    seen[id(node)] = state
    try:
        new_ins, new_outs = refine(node, ins, outs)
    except RuleError as exc:
        raise InferenceError(node, str(exc)) from None
    except Conflict as exc:
        raise InferenceError(node, f"inconsistent {kind}s {_text(exc.old)} and "
                                   f"{_text(exc.new)}") from None
    changed = False
    for position, (key, value) in enumerate(zip(in_keys + out_keys, list(new_ins) + list(new_outs),
                                                strict=False)):
        if value is None:
            continue
        old = values[key]
        try:
            merged = merge(old, value)
        except Conflict:
            what = (f"input {position} ({node.inputs[position][0].name})"
                    if position < len(in_keys) else f"output {position - len(in_keys)}")
            raise InferenceError(node, f"{what} has {kind} {_text(old)} but the operator "
                                       f"needs {_text(value)}") from None
        if merged != old:
            values[key] = merged
            changed = True
    return changed


def _text(value: Any) -> str:
    return getattr(value, "__name__", None) or str(value)
