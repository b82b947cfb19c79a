"""MXNet model files for the service's tests: a user-style network with a residual add
and a Reshape, as ``mx.sym.save`` and ``mx.nd.save`` write them (built with the engine's
``symbol`` and its writer of MXNet's params format, byte-compatible with MXNet 1.9)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

import engine as mx
from engine.ndarray.mxnet_format import write_params

# digits' 64 features, batch first
INPUT_SHAPE = (1, 64)


def residual_symbol(classes: int = 10) -> Any:
    data = mx.sym.var("data")
    image = mx.sym.Reshape(data, shape=(0, 1, 8, 8), name="to_image")
    stem = mx.sym.Convolution(image, num_filter=4, kernel=(3, 3), pad=(1, 1), name="stem")
    stem = mx.sym.BatchNorm(stem, name="stem_bn")
    stem = mx.sym.Activation(stem, act_type="relu", name="stem_relu")
    branch = mx.sym.Convolution(stem, num_filter=4, kernel=(3, 3), pad=(1, 1), name="branch")
    joined = mx.sym.elemwise_add(stem, branch, name="residual")
    pooled = mx.sym.Pooling(joined, kernel=(1, 1), global_pool=True, pool_type="avg",
                            name="pool")
    return mx.sym.FullyConnected(mx.sym.Flatten(pooled, name="flat"), num_hidden=classes,
                                 name="fc")


def symbol_json(classes: int = 10) -> bytes:
    return residual_symbol(classes).tojson().encode()


def parameter_shapes(symbol: Any, input_shape: tuple[int, ...] = INPUT_SHAPE
                     ) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]:
    arg_shapes, _, aux_shapes = symbol.infer_shape(data=input_shape)
    args = {n: tuple(s) for n, s in zip(symbol.list_arguments(), arg_shapes, strict=True)
            if n != "data"}
    aux = {n: tuple(s) for n, s in zip(symbol.list_auxiliary_states(), aux_shapes, strict=True)}
    return args, aux


def params_file(classes: int = 10, *, seed: int = 0, rename: dict[str, str] | None = None,
                reshape: dict[str, tuple[int, ...]] | None = None) -> bytes:
    """Random weights under MXNet's ``arg:``/``aux:`` names; ``rename``/``reshape`` spoil
    some on purpose."""
    rng = np.random.default_rng(seed)
    args, aux = parameter_shapes(residual_symbol(classes))
    arrays = {}
    for kind, shapes in (("arg", args), ("aux", aux)):
        for name, shape in shapes.items():
            shape = (reshape or {}).get(name, shape)
            value = rng.normal(0, 0.1, size=shape).astype(np.float32)
            if name.endswith("moving_var"):
                value = np.abs(value) + 1
            arrays[f"{kind}:{(rename or {}).get(name, name)}"] = value
    return write_params(arrays)


def with_nodes(raw: bytes, change: Any) -> bytes:
    """The symbol JSON with ``change(graph)`` applied (to make broken ones)."""
    graph = json.loads(raw)
    change(graph)
    return json.dumps(graph).encode()
