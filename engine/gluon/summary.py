"""``Block.summary``: MXNet 1.9's table of each layer's output shape and parameter count.

The block runs once on ``inputs`` with a forward hook on every layer (containers such as
``Sequential`` are not rows of their own); a parameter shared between layers is counted in
each, and reported as shared. The block must be initialized and not hybridized
(AssertionError otherwise, as in MXNet).

>>> import engine as mx
>>> net = mx.gluon.nn.Dense(2, in_units=3); net.initialize()
>>> net.summary(mx.nd.ones((1, 3)))  # doctest: +ELLIPSIS
--------------------------------------------------------------------------------
        Layer (type)                                Output Shape         Param #
================================================================================
               Input                                      (1, 3)               0
             Dense-1                                      (1, 2)               8
...
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ..ndarray.ndarray import NDArray


def _shape_text(value: Any) -> str:
    """Shapes of the arrays in ``value`` (nested as given); other values as they are."""
    def shapes(x: Any) -> Any:
        if isinstance(x, (list, tuple)):
            return [shapes(v) for v in x]
        return x.shape if isinstance(x, NDArray) else x

    found = shapes(value)
    return str(found)[1:-1] if isinstance(found, list) else str(found)


def print_summary(block: Any, *inputs: Any) -> None:
    from .hybrid.hybrid_block import HybridBlock
    from .nn.basic_layers import HybridSequential, Sequential

    rows: OrderedDict[str, dict[str, Any]] = OrderedDict()
    rows["Input"] = {"output_shape": _shape_text(list(inputs) if len(inputs) != 1
                                                 else inputs[0]),
                     "n_params": 0, "trainable": 0, "shared": 0}
    seen: set[int] = set()
    hooks = []

    def record(layer: Any, _: Any, outputs: Any) -> None:
        row = {"output_shape": _shape_text(outputs), "n_params": 0, "trainable": 0,
               "shared": 0}
        for param in layer.params.values():
            size = param.data().size
            row["n_params"] += size
            row["trainable"] += 0 if param.grad_req == "null" else size
            if id(param) in seen:
                row["shared"] += size
            seen.add(id(param))
        rows[f"{type(layer).__name__}-{len(rows)}"] = row

    def hook(layer: Any) -> None:
        assert not isinstance(layer, HybridBlock) or not layer._active, \
            f'"{layer.name}" must not be hybridized to print summary.'
        if not isinstance(layer, (Sequential, HybridSequential)):
            hooks.append(layer.register_forward_hook(record))

    try:
        block.apply(hook)
        block(*inputs)
        line = "{:>20}  {:>42} {:>15}"
        text = ["-" * 80, line.format("Layer (type)", "Output Shape", "Param #"), "=" * 80]
        text += [line.format(name, str(row["output_shape"]), row["n_params"])
                 for name, row in rows.items()]
        total = sum(r["n_params"] for r in rows.values())
        trainable = sum(r["trainable"] for r in rows.values())
        shared = sum(r["shared"] for r in rows.values())
        text += ["=" * 80, "Parameters in forward computation graph, duplicate included",
                 f"   Total params: {total}", f"   Trainable params: {trainable}",
                 f"   Non-trainable params: {total - trainable}",
                 f"Shared params in forward computation graph: {shared}",
                 f"Unique parameters in model: {total - shared}", "-" * 80]
        print("\n".join(text))
    finally:
        for h in hooks:
            h.detach()
