"""``engine.gluon``: MXNet Gluon's imperative training API.

>>> import engine as mx
>>> net = mx.gluon.nn.Dense(1, in_units=2); net.initialize()
>>> sorted(net.collect_params().keys())[0].endswith("_bias")
True
"""

from __future__ import annotations

import importlib
from typing import Any

from . import data, loss, nn, rnn, utils
from .block import Block, HybridBlock
from .parameter import Constant, DeferredInitializationError, Parameter
from .parameter_dict import ParameterDict

# The Trainer and the estimator are other areas' modules: import them on first use so this
# package imports (and is testable) before they exist.
_LAZY = {"Trainer": ("engine.gluon.trainer", "Trainer"),
         "SymbolBlock": ("engine.gluon.symbol_block", "SymbolBlock"),
         "trainer": ("engine.gluon.trainer", None),
         "estimator": ("engine.gluon.estimator", None),
         "contrib": ("engine.gluon.contrib", None),
         "model_zoo": ("engine.gluon.model_zoo", None)}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'engine.gluon' has no attribute {name!r}")
    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    value = getattr(module, attr) if attr else module
    globals()[name] = value
    return value


__all__ = [
    "Block", "Constant", "DeferredInitializationError", "HybridBlock", "Parameter",
    "ParameterDict", "SymbolBlock", "Trainer", "data", "estimator", "loss", "model_zoo", "nn",
    "utils",
]
__all__ += ["contrib", "rnn"]
