"""Every other ``mx.sym`` operator: the NDArray function of the same name, run on symbols.

``mx.sym.sum(x, axis=1)`` makes a node ``sum`` whose forward calls ``engine.nd.sum`` on the
input arrays with the node's attributes. Symbol arguments are the node's inputs (they must
come first in the function's signature, as MXNet's tensor inputs do); the others become
string attributes, written in MXNet's JSON and parsed back as Python literals. Shapes
come from the operator's shape function (:mod:`.shapes`), which also declares the domain
of each attribute, checked when the node is made or loaded; an operator without one is
inferred by running the function once on zero arrays of the input shapes (random
generators are restored afterwards, so inference never changes what a seed draws); a
user's graph may not use those (:func:`.validation.inspect_symbol`).

Every operator has its one implementation in :mod:`engine.ndarray`; this module only adapts
calling conventions.
"""

from __future__ import annotations

import ast
import functools
import inspect
import warnings
from typing import Any

import numpy

from .ops import OPS, OpSpec, Shape, to_attr_string
from .shapes import rule_for

# MXNet's name in the graph -> the engine.nd function that computes it
ND_NAME = {
    "SwapAxis": "swapaxes", "SliceChannel": "split", "Cast": "cast", "BlockGrad": "stop_gradient",
    "Pad": "pad", "_copy": "identity", "sum_axis": "sum", "max_axis": "max", "min_axis": "min",
    "broadcast_plus": "broadcast_add", "broadcast_minus": "broadcast_sub", "pow": "power",
    "_power": "power", "_maximum": "maximum", "_minimum": "minimum", "_hypot": "hypot",
    "_mod": "broadcast_mod", "_grad_add": "elemwise_add", "softmax_activation": "SoftmaxActivation",
    "choose_element_0index": "pick", "_zeros": "zeros", "_ones": "ones", "_full": "full",
    "_arange": "arange", "_eye": "eye", "_linspace": "linspace", "reverse": "flip",
    "_random_uniform": "random_uniform", "_random_normal": "random_normal",
    "_equal": "broadcast_equal", "_not_equal": "broadcast_not_equal",
    "_greater": "broadcast_greater", "_greater_equal": "broadcast_greater_equal",
    "_lesser": "broadcast_lesser", "_lesser_equal": "broadcast_lesser_equal",
}
# the name MXNet writes in the JSON for a function called by another name
CANONICAL = {
    "swapaxes": "SwapAxis", "split": "SliceChannel", "cast": "Cast", "stop_gradient": "BlockGrad",
    "pad": "Pad", "crop": "slice", "identity": "_copy", "broadcast_plus": "broadcast_add",
    "broadcast_minus": "broadcast_sub", "sum_axis": "sum", "max_axis": "max",
    "min_axis": "min", "pow": "_power", "flip": "reverse",
}


def _split_outputs(p: dict[str, Any]) -> list[str]:
    return [f"output{i}" for i in range(int(p.get("num_outputs", 1)))]


# operators with several visible outputs -> their output suffixes
MULTI_OUTPUT = {
    "split": _split_outputs, "SliceChannel": _split_outputs, "split_v2": lambda p: [
        f"output{i}" for i in range(
            len(p["indices_or_sections"]) + 1 if isinstance(p.get("indices_or_sections"),
                                                            tuple)
            else int(p.get("indices_or_sections", p.get("sections", 1))))],
    "topk": lambda p: ["output0", "output1"] if p.get("ret_typ") == "both" else ["output"],
    "moments": lambda p: ["output0", "output1"],
    "histogram": lambda p: ["output0", "output1"],
    "linalg_gelqf": lambda p: ["output0", "output1"],
    "linalg_slogdet": lambda p: ["output0", "output1"],
    "sample_multinomial": lambda p: ["output0", "output1"] if p.get("get_prob") else ["output"],
}
# attributes MXNet writes that only describe the graph, never an argument of the function
BOOKKEEPING = {"num_args", "workspace", "cudnn_tune", "cudnn_off"}


def _transpose(data: Any, axes: Any = ()) -> Any:
    return data.transpose(*axes) if axes else data.transpose()


# engine.nd functions whose signature cannot be bound as MXNet's symbol call: nd.transpose
# takes the axes as ``*axes`` (NDArray.transpose's style), which would make every positional
# argument of ``mx.sym.transpose(x, (1, 0, 2))`` a Symbol input; these wrappers only rename
# arguments and still compute through engine.nd
ADAPTERS: dict[str, Any] = {"transpose": _transpose}


# engine.nd functions that are no graph operator: file and device I/O, array creation from
# Python objects, and the optimizers' in-place updates. Graph files come from users, so a
# node may never name one of these (``save`` would write a file during shape inference).
NOT_GRAPH_OPERATORS = frozenset({
    "load", "load_frombuffer", "save", "waitall", "array", "empty", "from_numpy", "from_dlpack",
    "to_dlpack_for_read", "to_dlpack_for_write", "reset_arrays", "CachedOp", "NDArray", "Any",
    "onehot_encode", "fill_element_0index", "all_finite", "multi_all_finite", "multi_sum_sq",
    "multi_lars", "apply_op", "accepting_out",
})


def _is_graph_operator(name: str) -> bool:
    return not (name in NOT_GRAPH_OPERATORS or name.startswith("_") or "update" in name
                or name.startswith(("multi_", "preloaded_")))


def nd_function(op: str) -> Any:
    """The NDArray function computing ``op``, or None (also for the engine.nd functions that
    are no operator, :data:`NOT_GRAPH_OPERATORS`)."""
    from .. import nd

    name = ND_NAME.get(op, op)
    if not _is_graph_operator(name):
        return None
    fn = ADAPTERS.get(name) or getattr(nd, name, None)
    if callable(fn) and not inspect.isclass(fn) and not inspect.ismodule(fn):
        return fn
    return None


# Shapes of generic operators are inferred by running them on zeros; a graph from a user
# could declare shapes that need terabytes, so inputs and shape-like attributes are capped.
MAX_INFER_ELEMENTS = 1 << 28


def _elements(shape: Any) -> int:
    count = 1
    for d in shape if isinstance(shape, (list, tuple)) else (shape,):
        count *= abs(int(d)) if isinstance(d, (int, numpy.integer)) else 1
    return count


def _check_inference_size(params: dict[str, Any], shapes: list[Shape]) -> None:
    largest = max((_elements(s) for s in shapes), default=1)
    estimates = [largest]
    for key in ("shape", "reps"):
        if isinstance(params.get(key), (int, list, tuple)):
            estimates.append(_elements(params[key]) * (largest if key == "reps" else 1))
    for key in ("repeats", "depth", "size"):
        if isinstance(params.get(key), int):
            estimates.append(abs(params[key]) * largest)
    if len(shapes) > 1:
        try:
            estimates.append(_elements(numpy.broadcast_shapes(*shapes)))
        except ValueError:
            pass  # not a broadcast: the operator itself reports the mismatch
    if max(estimates) > MAX_INFER_ELEMENTS:
        raise ValueError(f"tensors of {max(estimates)} elements are more than the "
                         f"{MAX_INFER_ELEMENTS} shape inference allows")


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)  # literals only, never code
    except (ValueError, SyntaxError):
        return text


def _zeros_like_shape(shape: Shape) -> Any:
    from .. import nd

    return nd.zeros(shape)


class GenericSpec(OpSpec):
    """An :class:`OpSpec` built from an NDArray function's signature."""

    def __init__(self, op: str, fn: Any) -> None:
        super().__init__(op, (), {}, self._infer, self._forward, hint=op.lower(),
                         outputs=MULTI_OUTPUT.get(op))
        self.fn = fn
        self.num_outputs = 1
        self.rule = rule_for(op)

    def parse(self, attrs: dict[str, str]) -> dict[str, Any]:
        params = {k: _literal(v) for k, v in attrs.items()
                  if not k.startswith("__") and k not in BOOKKEEPING}
        if self.rule is not None:
            # checked now; the function still receives the values as written (a domain
            # may normalise, e.g. an int to a one-element tuple)
            self.rule.validate(params)
        return params

    @functools.cached_property
    def accepted_attributes(self) -> frozenset[str] | None:
        """The attribute names both the shape rule declares and the function takes (None
        without a rule): what a user's graph may set."""
        if self.rule is None:
            return None
        parameters = inspect.signature(self.fn).parameters.values()
        if any(p.kind == p.VAR_KEYWORD for p in parameters):
            return frozenset(self.rule.attrs)
        return frozenset(self.rule.attrs) & {p.name for p in parameters}

    def input_names(self, params: dict[str, Any], count: int = 0) -> tuple[str, ...]:
        return tuple(f"arg{i}" for i in range(count))

    def _forward(self, params: dict[str, Any], inputs: list[Any]) -> Any:
        return self.fn(*inputs, **params)

    def _infer(self, params: dict[str, Any], shapes: list[Shape | None]) -> Any:
        if any(s is None for s in shapes):
            return shapes, None
        rule = self.rule
        if rule is not None:
            rule.check_inputs(len(shapes))
            known = [tuple(int(d) for d in s) for s in shapes]  # type: ignore[union-attr]
            result = rule.infer(rule.validate(params), known)
            return shapes, list(result) if isinstance(result, list) else tuple(result)
        _check_inference_size(params, shapes)  # type: ignore[arg-type]
        from .. import autograd
        from .. import random as engine_random

        state = engine_random.get_state()
        try:
            # zeros may sit outside an operator's domain (log, pdfs): only shapes matter here
            with autograd.pause(), numpy.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = self._forward(params, [_zeros_like_shape(tuple(s))  # type: ignore
                                                for s in shapes])
        finally:
            engine_random.set_state(state)
        if isinstance(result, (list, tuple)):
            return shapes, [tuple(r.shape) for r in result]
        return shapes, tuple(result.shape)


def generic_spec(op: str) -> GenericSpec | None:
    """The spec of ``op`` (registered in ``OPS`` on first use), or None when unknown."""
    if op in OPS:
        spec = OPS[op]
        return spec if isinstance(spec, GenericSpec) else None
    fn = nd_function(op)
    if fn is None:
        return None
    spec = GenericSpec(op, fn)
    OPS[op] = spec
    return spec


def _attr_value(value: Any) -> str:
    if isinstance(value, type) and issubclass(value, numpy.generic):
        return numpy.dtype(value).name
    if isinstance(value, numpy.dtype):
        return value.name
    return to_attr_string(value)


def bind_arguments(fn: Any, op: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                   is_symbol: Any) -> tuple[list[Any], dict[str, str]]:
    """Split a call into its symbol inputs (in order) and its string attributes."""
    signature = inspect.signature(fn)
    params = list(signature.parameters.values())
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        flat: list[Any] = []
        for arg in args:
            flat.extend(arg if isinstance(arg, (list, tuple)) else [arg])
        inputs = [a for a in flat if is_symbol(a)]
        if len(inputs) != len(flat):
            raise TypeError(f"{op}: positional arguments must be Symbols")
        kwargs = {k: v for k, v in kwargs.items() if k != "num_args"}
        return inputs, {k: _attr_value(v) for k, v in kwargs.items() if v is not None}
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                       p.POSITIONAL_OR_KEYWORD)]
    # MXNet's input names (data, lhs, rhs) for functions whose parameters are named x, a, b
    for alias, index in (("data", 0), ("lhs", 0), ("rhs", 1)):
        if alias in kwargs and alias not in signature.parameters and index < len(positional):
            kwargs[positional[index]] = kwargs.pop(alias)
    try:
        bound = signature.bind_partial(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{op}: {exc}") from None
    inputs: list[Any] = []
    attrs: dict[str, str] = {}
    for position, param in enumerate(params):
        if param.name not in bound.arguments:
            continue
        value = bound.arguments[param.name]
        if param.kind == param.VAR_KEYWORD:
            attrs.update({k: _attr_value(v) for k, v in value.items() if v is not None})
        elif is_symbol(value):
            if position != len(inputs):
                raise TypeError(f"{op}: Symbol argument {param.name!r} must follow the other "
                                "Symbol inputs")
            inputs.append(value)
        elif value is not None:
            attrs[param.name] = _attr_value(value)
    return inputs, attrs
