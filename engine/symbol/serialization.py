"""Symbols as MXNet's JSON graph (the ``prefix-symbol.json`` file), both directions.

The layout is MXNet 1.9's: ``nodes`` (``op``, ``name``, string ``attrs``, ``inputs`` as
``[node, output, version]``), ``arg_nodes``, ``node_row_ptr`` and ``heads``, so graphs
round-trip with MXNet.
"""

from __future__ import annotations

import json
from typing import Any

from .generic import generic_spec
from .ops import OPS
from .symbol import Symbol, _Node


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
        entry["inputs"] = [[index[id(c)], i, 0] for c, i in node.inputs]
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
    return json.dumps(graph, indent=2)


def load_json(json_str: str) -> Symbol:
    """A symbol from MXNet's JSON graph format."""
    try:
        graph = json.loads(json_str)
        raw_nodes = graph["nodes"]
        heads = graph["heads"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"not a symbol JSON graph: {exc}") from None
    try:
        return _build(raw_nodes, heads)
    except (KeyError, TypeError, IndexError, AttributeError) as exc:
        raise ValueError(f"malformed symbol JSON graph: {type(exc).__name__}: {exc}") from None


def _build(raw_nodes: Any, heads: Any) -> Symbol:
    nodes: list[_Node] = []
    for i, entry in enumerate(raw_nodes):
        op = entry.get("op", "null")
        attrs = entry.get("attrs", entry.get("attr", entry.get("param", {}))) or {}
        inputs = []
        for ref in entry.get("inputs", []):
            if not 0 <= ref[0] < i:
                raise ValueError(f"symbol JSON node {i} refers to node {ref[0]} out of order")
            inputs.append((nodes[ref[0]], int(ref[1]) if len(ref) > 1 else 0))
        if op != "null" and op not in OPS and generic_spec(op) is None:
            raise ValueError(f"symbol JSON uses operator {op!r}, which Rudder does not "
                             f"implement; supported: {sorted(OPS)}")
        node = _Node(None if op == "null" else op, entry["name"],
                     {str(k): str(v) for k, v in attrs.items()}, inputs)
        if node.op is not None:
            node.params()  # validate the attributes now, not at the first forward
        nodes.append(node)
    return Symbol([(nodes[h[0]], int(h[1]) if len(h) > 1 else 0) for h in heads])


def load(fname: str) -> Symbol:
    """Load a ``prefix-symbol.json`` file (as written by :meth:`Symbol.save`)."""
    with open(fname) as handle:
        text = handle.read()
    try:
        return load_json(text)
    except ValueError as exc:
        raise ValueError(f"{fname}: {exc}") from None
