"""``engine.symbol`` (``mx.sym``): declarative graphs for ``Module``.

Operators take input symbols positionally or by input name (``data=``, ``weight=``,
``label=``), then their parameters positionally or as keywords (``Dropout(x, 0.5)``), and
an optional ``name``/``attr``; inputs left out become variables named ``<name>_<input>``
(``fc_weight``, ``softmax_label``). Unnamed operators are numbered per type:
``fullyconnected0``, ``activation0``, ... (see :mod:`engine.name`). Layers with learned
inputs have their own specs; every other MXNet operator (``sum``, ``exp``, ``dot``,
``log_softmax``, ...) runs the ``engine.nd`` function of the same name (:mod:`.generic`).

>>> import engine as mx
>>> x = mx.sym.var('data')
>>> h = mx.sym.Activation(mx.sym.FullyConnected(x, num_hidden=4), act_type='relu')
>>> mx.sym.load_json(h.tojson()).list_arguments()[0]
'data'
>>> mx.sym.sum(x, axis=1).infer_shape(data=(2, 3))[1]
[(2,)]
"""

from __future__ import annotations

from typing import Any

from .. import name as _name
from ..name import NameManager, Prefix
from .build import Group, Variable, _make_op, make_generic, var
from .generic import generic_spec
from .ops import OPS
from .serialization import SymbolFormatError, load, load_json
from .symbol import Symbol
from .validation import Bounds, GraphTooLarge, check_params, inspect_symbol, inspect_symbol_json


def _operator(op: str, hint: str | None = None) -> Any:
    def make(*args: Any, name: str | None = None, attr: dict[str, str] | None = None,
             **kwargs: Any) -> Symbol:
        if name is None and hint is not None:  # named after the function (elemwise_add0),
            name = _name.current().get(None, hint)  # where ``a + b`` gives _plus0
        return _make_op(op, args, kwargs, name, attr)

    spec = OPS[op]
    make.__name__ = op
    make.__doc__ = (f"MXNet's ``{op}`` operator (inputs: {', '.join(spec.inputs + spec.aux)}; "
                    f"parameters: {', '.join(spec.params)}).")
    return make


def _generic_operator(op: str) -> Any:
    def make(*args: Any, name: str | None = None, attr: dict[str, str] | None = None,
             **kwargs: Any) -> Symbol:
        return make_generic(op, args, kwargs, name, attr)

    make.__name__ = op
    make.__doc__ = f"MXNet's ``{op}`` operator on symbols (``engine.nd.{op}`` on the inputs)."
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
Deconvolution = _operator("Deconvolution")
Pooling = _operator("Pooling")
BatchNorm = _operator("BatchNorm")
Embedding = _operator("Embedding")
LayerNorm = _operator("LayerNorm")
InstanceNorm = _operator("InstanceNorm")
GroupNorm = _operator("GroupNorm")
SoftmaxOutput = _operator("SoftmaxOutput")
Softmax = SoftmaxOutput
LinearRegressionOutput = _operator("LinearRegressionOutput")
LogisticRegressionOutput = _operator("LogisticRegressionOutput")
MAERegressionOutput = _operator("MAERegressionOutput")
SVMOutput = _operator("SVMOutput")
RNN = _operator("RNN")
CTCLoss = _operator("CTCLoss")


def ctc_loss(*args: Any, name: str | None = None, attr: dict[str, str] | None = None,
             **kwargs: Any) -> Symbol:
    """MXNet's ``ctc_loss``: the ``CTCLoss`` operator, named ``ctc_loss<n>``."""
    return _make_op("CTCLoss", args, kwargs, _name.current().get(name, "ctc_loss"), attr)
elemwise_add = _operator("elemwise_add", "elemwise_add")
elemwise_sub = _operator("elemwise_sub", "elemwise_sub")
elemwise_mul = _operator("elemwise_mul", "elemwise_mul")
elemwise_div = _operator("elemwise_div", "elemwise_div")
broadcast_add = _operator("broadcast_add")
broadcast_sub = _operator("broadcast_sub")
broadcast_mul = _operator("broadcast_mul")
broadcast_div = _operator("broadcast_div")
broadcast_plus = broadcast_add
broadcast_minus = broadcast_sub
negative = _operator("negative")
BatchNorm_v1 = _operator("BatchNorm_v1")
Convolution_v1 = _operator("Convolution_v1")
Pooling_v1 = _operator("Pooling_v1")


def _elementwise(op: str, scalar_op: str, rscalar_op: str, number: Any) -> Any:
    def make(left: Any, right: Any, name: str | None = None) -> Any:
        if isinstance(left, Symbol) and isinstance(right, Symbol):
            return _make_op(op, [left, right], {}, name)
        if isinstance(left, Symbol):
            return _make_op(scalar_op, [left], {"scalar": right}, name)
        if isinstance(right, Symbol):
            return _make_op(rscalar_op, [right], {"scalar": left}, name)
        return number(left, right)

    make.__name__ = op.strip("_")
    make.__doc__ = (f"MXNet's ``mx.sym.{make.__name__}``: ``{op}`` between symbols, "
                    f"``{scalar_op}`` with a number.")
    return make


maximum = _elementwise("_maximum", "_maximum_scalar", "_maximum_scalar", max)
minimum = _elementwise("_minimum", "_minimum_scalar", "_minimum_scalar", min)
power = _elementwise("_power", "_power_scalar", "_rpower_scalar", pow)
pow = power  # noqa: A001 - MXNet's name
hypot = _elementwise("_hypot", "_hypot_scalar", "_hypot_scalar",
                     lambda a, b: (a * a + b * b) ** 0.5)


def Concat(*data: Symbol, dim: int = 1, name: str | None = None,  # noqa: N802
           num_args: int | None = None, attr: dict[str, str] | None = None) -> Symbol:
    """Join ``data`` along ``dim``."""
    return _make_op("Concat", data, {"dim": dim}, name, attr)


concat = Concat

# names that are not operators of their own
_NOT_OPERATORS = {"Any", "NDArray", "annotations", "apply_op", "array", "load", "save",
                  "waitall", "random", "ndarray", "binary", "unary"}
_NAMESPACES = {"random": "namespaces.random", "linalg": "namespaces.linalg",
               "op": "namespaces.op", "_internal": "namespaces.internal"}
_FLUENT_EXCLUDED = {"zeros", "ones", "full", "arange", "eye", "linspace", "var", "Variable",
                    "Group", "load", "load_json"}


def __getattr__(name: str) -> Any:
    if name in _NAMESPACES:  # mx.sym.random, mx.sym.linalg, mx.sym.op, mx.sym._internal
        import importlib

        return importlib.import_module(f"engine.symbol.{_NAMESPACES[name]}")
    if name.startswith("__") or name in _NOT_OPERATORS:
        raise AttributeError(f"module 'engine.symbol' has no attribute {name!r}")
    if generic_spec(name) is None:
        raise AttributeError(f"module 'engine.symbol' has no attribute {name!r}")
    fn = _generic_operator(name)
    globals()[name] = fn
    return fn


def __dir__() -> list[str]:
    from .. import nd
    from .generic import ADAPTERS

    public = {n for n in dir(nd) if not n.startswith("_") and n not in _NOT_OPERATORS
              and callable(getattr(nd, n))}
    return sorted(set(globals()) | set(ADAPTERS) | set(_NAMESPACES) | public)


def _fluent(name: str) -> Any:
    """The namespace function a Symbol method ``name`` calls, or None."""
    if name in _FLUENT_EXCLUDED or not name[:1].islower():
        return None
    try:
        fn = globals()[name] if name in globals() else __getattr__(name)
    except AttributeError:
        return None
    return fn if callable(fn) and not isinstance(fn, type) else None


__all__ = [
    "Activation", "BatchNorm", "CTCLoss", "Concat", "Convolution", "Deconvolution", "Dropout",
    "Embedding", "Flatten", "FullyConnected", "Group", "GroupNorm", "InstanceNorm",
    "LayerNorm", "LeakyReLU", "LinearRegressionOutput", "LogisticRegressionOutput",
    "MAERegressionOutput", "NameManager", "BatchNorm_v1", "Convolution_v1", "Pooling_v1",
    "Pooling", "Prefix", "RNN", "Reshape", "Softmax", "SoftmaxOutput", "SVMOutput", "Symbol",
    "Variable", "broadcast_add", "broadcast_div", "broadcast_minus",
    "broadcast_mul", "broadcast_plus", "broadcast_sub", "concat", "ctc_loss", "elemwise_add",
    "elemwise_div", "elemwise_mul", "elemwise_sub", "flatten", "hypot", "maximum", "minimum",
    "pow", "power", "load", "load_json", "SymbolFormatError", "inspect_symbol_json",
    "inspect_symbol", "Bounds", "GraphTooLarge",
    "check_params",
    "negative", "reshape", "var",
]
