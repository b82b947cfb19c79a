"""``Block.save(prefix)`` / ``Block.load(prefix)``: MXNet 1.9's model files.

``<prefix>-model.json`` describes the Block tree: one entry per Block, keyed by its class
name and its position in a depth-first walk (``dense1``), with the Block's name when saved,
its children's attribute names, and, for a hybridized HybridBlock that has run, its graph
(``symbol``, ``inputs``). ``<prefix>-model.params`` holds the parameters by attribute path
(``save_parameters``). ``load`` expects the same tree, built in the same order: it gives
the Blocks and their parameters the names they had when saved, marks the hybridized ones
hybridized again (the engine compiles its program at the next call; the stored graph is
there for MXNet) and loads the parameters.

>>> import engine as mx, tempfile, os
>>> def build(prefix):
...     net = mx.gluon.nn.HybridSequential(prefix=prefix)
...     with net.name_scope():
...         net.add(mx.gluon.nn.Dense(2, in_units=3))
...     return net
>>> net = build('saved_'); net.initialize()
>>> prefix = os.path.join(tempfile.mkdtemp(), 'net')
>>> net.save(prefix)
>>> other = build('other_'); other.load(prefix)
>>> other.name, sorted(other.collect_params())
('saved', ['saved_dense0_bias', 'saved_dense0_weight'])
"""

from __future__ import annotations

import json
from typing import Any


def save_model(block: Any, prefix: str) -> None:
    model: dict[str, Any] = {}
    index = [0]

    def describe(blk: Any, structure: dict[str, Any]) -> None:
        entry: dict[str, Any] = {"orig_name": blk.name}
        structure[type(blk).__name__.lower() + str(index[0])] = entry
        if _is_hybrid(blk):
            graph = _graph(blk)
            entry["hybridized"] = graph is not None
            if graph is not None:
                entry["inputs"], entry["symbol"] = graph
        children: dict[str, str] = {}
        entry["children"] = children
        for attr_name, child in blk._children.items():
            index[0] += 1
            children[child.name] = attr_name
            describe(child, entry)

    describe(block, model)
    with open(prefix + "-model.json", "w") as handle:
        json.dump(model, handle)
    block.save_parameters(prefix + "-model.params")


def load_model(block: Any, prefix: str) -> None:
    with open(prefix + "-model.json") as handle:
        model = json.load(handle)
    index = [0]

    def restore(blk: Any, structure: dict[str, Any]) -> None:
        entry = structure[type(blk).__name__.lower() + str(index[0])]
        old_prefix = blk.params.prefix
        blk._name = entry["orig_name"]
        if _is_hybrid(blk) and entry.get("hybridized"):
            blk.hybridize()
        params = blk.params._params
        for key in list(params):  # the names the parameters had when saved
            param = params.pop(key)
            param.name = blk.name + "_" + key[len(old_prefix):]
            params[param.name] = param
        for _, child in list(blk._children.items()):
            index[0] += 1
            restore(child, entry)
        renamed = {}
        for key, child in blk._children.items():
            renamed[entry["children"].get(child.name, key)] = child
        blk._children.clear()
        blk._children.update(renamed)

    restore(block, model)
    block.load_parameters(prefix + "-model.params")


def _is_hybrid(blk: Any) -> bool:
    from .hybrid.hybrid_block import HybridBlock

    return isinstance(blk, HybridBlock)


def _graph(blk: Any) -> tuple[list[str], str] | None:
    """A hybridized block's graph (input variables and output) once it has run, as JSON."""
    if not blk._active or blk._cached_graph is None:
        return None
    from .symbol_block import _input_count, block_symbol

    count = _input_count(blk)
    names = ["data"] if count == 1 else [f"data{i}" for i in range(count)]
    from .. import symbol

    return [symbol.var(n).tojson() for n in names], block_symbol(blk, count).tojson()
