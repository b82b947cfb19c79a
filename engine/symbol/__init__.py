"""``engine.symbol`` (``mx.sym``): declarative graphs for ``Module``.

Operators take input symbols positionally or by input name (``data=``, ``weight=``,
``label=``), their parameters as keywords, and an optional ``name``; inputs left out
become variables named ``<name>_<input>`` (``fc_weight``, ``softmax_label``). Unnamed
operators are numbered per type: ``fullyconnected0``, ``activation0``, ...

>>> import engine as mx
>>> x = mx.sym.var('data')
>>> h = mx.sym.Activation(mx.sym.FullyConnected(x, num_hidden=4), act_type='relu')
>>> mx.sym.load_json(h.tojson()).list_arguments()[0]
'data'
"""

from __future__ import annotations

from typing import Any

from .ops import OPS
from .serialization import load, load_json
from .symbol import Group, NameManager, Symbol, Variable, _make_op, var


def _operator(op: str) -> Any:
    def make(*args: Any, name: str | None = None, attr: dict[str, str] | None = None,
             **kwargs: Any) -> Symbol:
        return _make_op(op, args, kwargs, name, attr)

    spec = OPS[op]
    make.__name__ = op
    make.__doc__ = (f"MXNet's ``{op}`` operator (inputs: {', '.join(spec.inputs + spec.aux)}; "
                    f"parameters: {', '.join(sorted(spec.params))}).")
    return make


FullyConnected = _operator("FullyConnected")
Activation = _operator("Activation")
LeakyReLU = _operator("LeakyReLU")
Dropout = _operator("Dropout")
Flatten = _operator("Flatten")
flatten = Flatten
Reshape = _operator("Reshape")
reshape = Reshape
Convolution = _operator("Convolution")
Pooling = _operator("Pooling")
BatchNorm = _operator("BatchNorm")
SoftmaxOutput = _operator("SoftmaxOutput")
Softmax = SoftmaxOutput
LinearRegressionOutput = _operator("LinearRegressionOutput")
LogisticRegressionOutput = _operator("LogisticRegressionOutput")
MAERegressionOutput = _operator("MAERegressionOutput")
elemwise_add = _operator("elemwise_add")
elemwise_sub = _operator("elemwise_sub")
elemwise_mul = _operator("elemwise_mul")
elemwise_div = _operator("elemwise_div")
broadcast_add = _operator("broadcast_add")
broadcast_sub = _operator("broadcast_sub")
broadcast_mul = _operator("broadcast_mul")
broadcast_div = _operator("broadcast_div")


def Concat(*data: Symbol, dim: int = 1, name: str | None = None,  # noqa: N802
           num_args: int | None = None) -> Symbol:
    """Join ``data`` along ``dim``."""
    return _make_op("Concat", data, {"dim": dim}, name)


concat = Concat

__all__ = [
    "Activation", "BatchNorm", "Concat", "Convolution", "Dropout", "Flatten",
    "FullyConnected", "Group", "LeakyReLU", "LinearRegressionOutput",
    "LogisticRegressionOutput", "MAERegressionOutput", "NameManager", "Pooling", "Reshape",
    "Softmax",
    "SoftmaxOutput", "Symbol", "Variable", "broadcast_add", "broadcast_div", "broadcast_mul",
    "broadcast_sub", "concat", "elemwise_add", "elemwise_div", "elemwise_mul", "elemwise_sub",
    "flatten", "load", "load_json", "reshape", "var",
]
