"""Symbols as MXNet's JSON graph (the ``prefix-symbol.json`` file), both directions.

The layout is MXNet 1.9's: ``nodes`` (``op``, ``name``, string ``attrs``, ``inputs`` as
``[node, output, version]``), ``arg_nodes``, ``node_row_ptr`` and ``heads``, so graphs
round-trip with MXNet. Graph files come from users: the loader checks the structure
(every reference in range, no cycle, known operators with valid attributes and the right
number of inputs) and raises :class:`SymbolFormatError` naming the node.
"""

from __future__ import annotations

import json
from typing import Any

from ..base import MXNetError
from ..util import is_np_shape
from .generic import generic_spec
from .ops import OPS
from .symbol import Symbol, _Node

MAX_NODES = 100_000  # far above any real network; bounds the work a hostile file can cause
MAX_ATTR_CHARS = 4096


class SymbolFormatError(MXNetError, ValueError):
    """A symbol JSON graph is malformed, uses an unknown operator, has a cycle or a dangling
    input, or its shapes do not fit (a ValueError too, as the problem is the input);
    ``node`` names the node at fault, when one is."""

    def __init__(self, message: str, node: str | None = None) -> None:
        super().__init__(message)
        self.node = node


class GraphTooLarge(SymbolFormatError):
    """A bound on the work a graph may cause was passed (too many nodes; in
    :func:`.validation.inspect_symbol` also a node too large, too much work, too long)."""


def to_json(symbol: Symbol) -> str:
    """MXNet's JSON text for ``symbol``."""
    nodes = symbol._nodes()
    index = {id(n): i for i, n in enumerate(nodes)}
    out_nodes = []
    row_ptr = [0]
    for node in nodes:
        entry: dict[str, Any] = {"op": "null" if node.op is None else node.op,
                                 "name": node.name}
        if node.attrs:
            entry["attrs"] = dict(node.attrs)
        # MXNet marks inputs an operator writes (auxiliary states) with version 1
        first_aux = len(node.inputs) - (len(node.spec.aux) if node.op is not None else 0)
        entry["inputs"] = [[index[id(c)], i, int(k >= first_aux)]
                           for k, (c, i) in enumerate(node.inputs)]
        out_nodes.append(entry)
        row_ptr.append(row_ptr[-1] + (1 if node.op is None else
                                      max(node.spec.num_outputs, node.visible_outputs())))
    graph = {
        "nodes": out_nodes,
        "arg_nodes": [i for i, n in enumerate(nodes) if n.op is None],
        "node_row_ptr": row_ptr,
        "heads": [[index[id(n)], i, 0] for n, i in symbol._outputs],
        "attrs": {"mxnet_version": ["int", 10901]},
    }
    if is_np_shape():  # MXNet marks graphs whose shapes use -1 for unknown sizes
        graph["attrs"]["is_np_shape"] = ["int", 1]
    return json.dumps(graph, indent=2)


def load_json(json_str: str) -> Symbol:
    """A symbol from MXNet's JSON graph format (``mx.sym.load_json``).

    >>> load_json('{"nodes": [{"op": "Nope", "name": "n", "inputs": []}], "heads": [[0, 0, 0]]}')
    Traceback (most recent call last):
    ...
    engine.symbol.serialization.SymbolFormatError: node 'n' (#0): unknown operator 'Nope'
    """
    try:
        graph = json.loads(json_str)
    except (ValueError, TypeError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise SymbolFormatError(f"symbol file is not valid JSON: {reason}") from None
    if not isinstance(graph, dict) or not isinstance(graph.get("nodes"), list) \
            or not isinstance(graph.get("heads"), list):
        raise SymbolFormatError("not a symbol JSON graph: expected an object with 'nodes' "
                                "and 'heads' lists")
    raw_nodes, heads = graph["nodes"], graph["heads"]
    if len(raw_nodes) > MAX_NODES:
        raise GraphTooLarge(f"symbol graph has {len(raw_nodes)} nodes, more than {MAX_NODES}")
    entries = [_entry(i, e) for i, e in enumerate(raw_nodes)]
    head_refs = [_ref(h, len(entries), "heads") for h in heads]
    if not head_refs:
        raise SymbolFormatError("symbol graph has no heads (outputs)")
    order = _topological_order(entries, [h[0] for h in head_refs])
    if is_np_shape() and "is_np_shape" not in (graph.get("attrs") or {}):
        _legacy_shapes_to_numpy(entries)
    return _build(entries, order, head_refs)


def _legacy_shapes_to_numpy(entries: list[_Entry]) -> None:
    """A graph saved outside ``np_shape`` marks unknown sizes with 0; read under it (where 0
    is a size), they become -1, as MXNet converts them."""
    from .ops import _tuple, to_attr_string

    for entry in entries:
        if entry.op == "null" and "__shape__" in entry.attrs:
            try:
                shape = _tuple(entry.attrs["__shape__"])
            except (ValueError, SyntaxError):
                continue  # reported where the shape is used
            entry.attrs["__shape__"] = to_attr_string(tuple(-1 if d == 0 else d for d in shape))


def load(fname: str) -> Symbol:
    """Load a ``prefix-symbol.json`` file (as written by :meth:`Symbol.save`)."""
    with open(fname) as handle:
        text = handle.read()
    try:
        return load_json(text)
    except SymbolFormatError as exc:
        raise SymbolFormatError(f"{fname}: {exc}") from None


# ----------------------------------------------------------------------- checking
class _Entry:
    __slots__ = ("index", "op", "name", "attrs", "inputs")

    def __init__(self, index: int, op: str, name: str, attrs: dict[str, str],
                 inputs: list[tuple[int, int]]) -> None:
        self.index, self.op, self.name, self.attrs, self.inputs = index, op, name, attrs, inputs

    def where(self) -> str:
        return f"node {self.name!r} (#{self.index})"


def _entry(index: int, raw: Any) -> _Entry:
    if not isinstance(raw, dict):
        raise SymbolFormatError(f"malformed node #{index}: not a JSON object")
    op, name = raw.get("op", "null"), raw.get("name")
    if not isinstance(op, str) or not isinstance(name, str) or not name:
        raise SymbolFormatError(f"malformed node #{index}: 'op' and 'name' must be non-empty "
                                f"strings")
    attrs = raw.get("attrs", raw.get("attr", raw.get("param", {}))) or {}
    if not isinstance(attrs, dict):
        raise SymbolFormatError(f"node {name!r} (#{index}): 'attrs' must be an object")
    inputs = raw.get("inputs", [])
    if not isinstance(inputs, list):
        raise SymbolFormatError(f"node {name!r} (#{index}): 'inputs' must be a list")
    refs = [_ref(r, None, f"node {name!r} (#{index}) input") for r in inputs]
    text = {str(k): str(v) for k, v in attrs.items()}
    long = [k for k, v in text.items() if len(v) > MAX_ATTR_CHARS]
    if long:
        raise SymbolFormatError(f"node {name!r} (#{index}): attribute {long[0]!r} is longer "
                                f"than {MAX_ATTR_CHARS} characters")
    return _Entry(index, op, name, text, refs)


def _ref(raw: Any, count: int | None, what: str) -> tuple[int, int]:
    if not isinstance(raw, list) or not 1 <= len(raw) <= 3 or \
            not all(isinstance(v, int) and not isinstance(v, bool) for v in raw):
        raise SymbolFormatError(f"{what} {raw!r} is not [node, output, version]")
    node, output = raw[0], raw[1] if len(raw) > 1 else 0
    if node < 0 or output < 0 or (count is not None and node >= count):
        raise SymbolFormatError(f"{what} refers to node {node}, which does not exist")
    return node, output


def _topological_order(entries: list[_Entry], heads: list[int]) -> list[int]:
    """Indices of the nodes the heads need, inputs first; a cycle or an input that names a
    missing node is an error naming the node."""
    count = len(entries)
    for entry in entries:
        for node, _ in entry.inputs:
            if node >= count:
                raise SymbolFormatError(f"{entry.where()}: input refers to node {node}, which "
                                        f"does not exist (the graph has {count} nodes); a "
                                        "dangling input")
    state = [0] * count  # 0 unseen, 1 on the current path, 2 done
    order: list[int] = []
    for head in heads:
        if state[head]:
            continue
        state[head] = 1
        stack: list[tuple[int, int]] = [(head, 0)]
        while stack:
            node, i = stack[-1]
            inputs = entries[node].inputs
            if i < len(inputs):
                stack[-1] = (node, i + 1)
                child = inputs[i][0]
                if state[child] == 1:
                    path = [entries[n].name for n, _ in stack]
                    cycle = path[[n for n, _ in stack].index(child):] + [entries[child].name]
                    raise SymbolFormatError(f"cycle in the graph: {' -> '.join(cycle)} (at "
                                            f"{entries[child].where()})")
                if state[child] == 0:
                    state[child] = 1
                    stack.append((child, 0))
            else:
                state[node] = 2
                order.append(node)
                stack.pop()
    return order


def _build(entries: list[_Entry], order: list[int], heads: list[tuple[int, int]]) -> Symbol:
    nodes: dict[int, _Node] = {}
    for index in order:
        entry = entries[index]
        if entry.op != "null":
            if entry.op not in OPS and generic_spec(entry.op) is None:
                raise SymbolFormatError(f"{entry.where()}: unknown operator {entry.op!r}",
                                        node=entry.name)
        inputs = []
        for ref, output in entry.inputs:
            child = nodes[ref]
            outputs = 1 if child.op is None else max(child.spec.num_outputs,
                                                     child.visible_outputs())
            if output >= outputs:
                raise SymbolFormatError(f"{entry.where()}: input {child.name!r} has "
                                        f"{outputs} output(s), output {output} requested")
            inputs.append((child, output))
        node = _Node(None if entry.op == "null" else entry.op, entry.name, entry.attrs, inputs)
        if node.op is not None:
            try:
                params = node.params()  # validate the attributes now, not at the first forward
            except Exception as exc:  # noqa: BLE001 - any failure to parse user text is its fault
                detail = str(exc).removeprefix(f"{entry.op}: ")  # a spec names itself
                raise SymbolFormatError(f"{entry.where()}: operator {entry.op}: {detail}",
                                        node=entry.name) from None
            _check_input_count(entry, node, params)
        elif inputs:
            raise SymbolFormatError(f"{entry.where()}: a variable cannot have inputs")
        nodes[index] = node
    _check_unique_variables(nodes.values())
    return Symbol([(nodes[n], o) for n, o in heads])


def _check_input_count(entry: _Entry, node: _Node, params: dict[str, Any]) -> None:
    spec = node.spec
    if spec.variadic or type(spec).__name__ == "GenericSpec":
        if spec.variadic and not node.inputs:
            raise SymbolFormatError(f"{entry.where()}: operator {entry.op} needs inputs")
        return
    expected = len(spec.input_names(params, len(node.inputs))) + len(spec.aux)
    if len(node.inputs) != expected:
        names = list(spec.input_names(params, len(node.inputs))) + list(spec.aux)
        raise SymbolFormatError(f"{entry.where()}: operator {entry.op} takes {expected} "
                                f"inputs ({', '.join(names)}), the graph gives "
                                f"{len(node.inputs)}")


def _check_unique_variables(nodes: Any) -> None:
    seen: set[str] = set()
    for node in nodes:
        if node.op is None:
            if node.name in seen:
                raise SymbolFormatError(f"two variables are named {node.name!r}")
            seen.add(node.name)
