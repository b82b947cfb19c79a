"""Building symbols: variables, groups, and operator nodes from Python calls.

>>> import engine as mx
>>> mx.sym.Dropout(mx.sym.var('x'), 0.3).attr('p')
'0.3'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import attribute as _attribute
from .. import name as _name
from .generic import CANONICAL, bind_arguments, generic_spec
from .ops import OPS, OpSpec, dtype_flag, to_attr_string
from .symbol import _HIDDEN_KEYS, Symbol, _Node


def Variable(name: str, attr: dict[str, str] | None = None, shape: Any = None,  # noqa: N802
             lr_mult: float | None = None, wd_mult: float | None = None, dtype: Any = None,
             init: Any = None, stype: str | None = None, profiler_scope: Any = None,
             **kwargs: Any) -> Symbol:
    """A named input of the graph (data, label or parameter).

    >>> Variable('w', lr_mult=2).attr('__lr_mult__')
    '2'
    """
    if not isinstance(name, str) or not name:
        raise TypeError("Expect a string for variable `name`")
    attrs = _attribute.current().get({_stored_key(str(k)): str(v)
                                      for k, v in (attr or {}).items()})
    if shape is not None:
        attrs["__shape__"] = to_attr_string(tuple(shape))
    if lr_mult is not None:
        attrs["__lr_mult__"] = str(lr_mult)
    if wd_mult is not None:
        attrs["__wd_mult__"] = str(wd_mult)
    if dtype is not None:
        attrs["__dtype__"] = dtype_flag(dtype)
    if init is not None:
        attrs["__init__"] = init if isinstance(init, str) else init.dumps()
    if stype is not None and stype != "default":
        raise NotImplementedError("sparse storage types are not supported by Rudder")
    for key, value in kwargs.items():
        if not (key.startswith("__") and key.endswith("__")):
            raise ValueError(f"Attribute name={key} is not supported. Additional attributes "
                             "must start and end with double underscores, e.g, __yourattr__")
        attrs[key] = str(value)
    return Symbol([(_Node(None, name, attrs), 0)])


var = Variable


def Group(symbols: Sequence[Symbol]) -> Symbol:  # noqa: N802
    """One symbol whose outputs are the outputs of ``symbols``, in order."""
    outputs = []
    for sym in symbols:
        if not isinstance(sym, Symbol):
            raise TypeError(f"Group takes Symbols, got {type(sym).__name__}")
        outputs.extend(sym._outputs)
    return Symbol(outputs)


def split_call(spec: OpSpec, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[
        list[Any], dict[str, Any]]:
    """Bind positional arguments as MXNet's generated signatures do: the inputs first, then
    the parameters in declaration order (``Dropout(data, 0.5)`` sets ``p``)."""
    slots = list(spec.inputs + spec.aux) + list(spec.params)
    if len(args) > len(slots):
        raise TypeError(f"{spec.name} takes at most {len(slots)} positional arguments, got "
                        f"{len(args)}")
    inputs: list[Any] = []
    kwargs = dict(kwargs)
    n_inputs = len(spec.inputs + spec.aux)
    for i, value in enumerate(args):
        if i < n_inputs:
            inputs.append(value)
        else:
            if slots[i] in kwargs:
                raise TypeError(f"{spec.name} got multiple values for {slots[i]!r}")
            kwargs[slots[i]] = value
    return inputs, kwargs


def _stored_key(key: str) -> str:
    """MXNet stores the keys it reserves (``lr_mult``, ``ctx_group``, ...) as ``__key__``."""
    return f"__{key}__" if key in _HIDDEN_KEYS else key


def _split_attr(attr: dict[str, Any] | None) -> tuple[dict[str, str], dict[str, Any]]:
    """An operator's ``attr=``: MXNet's reserved and ``__dunder__`` keys are attributes;
    any other key is an argument of the operator (so an unknown one is an error)."""
    attributes, arguments = {}, {}
    for key, value in (attr or {}).items():
        key = _stored_key(str(key))
        if key.startswith("__") and key.endswith("__"):
            attributes[key] = str(value)
        else:
            arguments[key] = value
    return attributes, arguments


def _make_op(op: str, args: Sequence[Any], kwargs: dict[str, Any], name: str | None,
             attr: dict[str, str] | None = None) -> Symbol:
    """Create an operator node; missing inputs become variables ``<name>_<input>``."""
    spec = OPS[op]
    attr, arguments = _split_attr(attr)
    kwargs = {**arguments, **kwargs}
    for key in _HIDDEN_KEYS:
        if key in kwargs and key not in spec.params:
            attr = {**(attr or {}), f"__{key}__": str(kwargs.pop(key))}
    if spec.variadic:
        symbols = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) \
            else list(args)
        symbols += [kwargs.pop(k) for k in sorted(kwargs) if isinstance(kwargs[k], Symbol)]
        inputs: list[Any] = symbols
    else:
        inputs, kwargs = split_call(spec, args, kwargs)
    symbol_kwargs = {k: v for k, v in kwargs.items() if isinstance(v, Symbol)}
    attrs = {k: to_attr_string(v) for k, v in kwargs.items()
             if not isinstance(v, Symbol) and v is not None}
    if spec.variadic:
        attrs.setdefault("num_args", str(len(inputs)))
        arg_names: tuple[str, ...] = tuple(f"arg{i}" for i in range(len(inputs)))
    else:
        params = spec.parse(attrs)
        arg_names = spec.input_names(params) + spec.aux
        for key in symbol_kwargs:
            if key not in spec.inputs + spec.aux:
                raise TypeError(f"{op} has no input {key!r}; inputs are {list(arg_names)}")
        full = spec.inputs + spec.aux
        by_name = dict(zip(full, inputs, strict=False))
        by_name.update(symbol_kwargs)
        inputs = [by_name.get(key) for key in arg_names]
    node_name = _name.current().get(name, spec.hint or op.lower())
    user_attrs = _attribute.current().get({str(k): str(v) for k, v in (attr or {}).items()})
    attrs.update(user_attrs)
    entries = []
    for key, sym in zip(arg_names, inputs, strict=True):
        if sym is None:
            # MXNet gives the variables it creates the operator's attributes
            var_attrs = dict(attrs)
            init = spec.aux_init.get(key)
            if init:
                var_attrs["__init__"] = init
            sym = Symbol([(_Node(None, f"{node_name}_{key}", var_attrs), 0)])
        if not isinstance(sym, Symbol):
            raise TypeError(f"{op} input {key!r} must be a Symbol, got {type(sym).__name__}")
        if len(sym._outputs) != 1:
            raise ValueError(f"{op} input {key!r} must have one output, got a group of "
                             f"{len(sym._outputs)}")
        entries.append(sym._outputs[0])
    node = _Node(op, node_name, attrs, entries)
    node.params()
    return Symbol([(node, i) for i in range(node.visible_outputs())])


def make_generic(op: str, args: Sequence[Any], kwargs: dict[str, Any], name: str | None,
                 attr: dict[str, str] | None = None) -> Symbol:
    """A node of an operator served by its NDArray function (see :mod:`.generic`)."""
    spec = generic_spec(op)
    if spec is None:
        raise AttributeError(f"engine.symbol has no operator {op!r}")
    user_attrs, arguments = _split_attr(attr)
    kwargs = {**arguments, **kwargs}
    for key in _HIDDEN_KEYS:
        if key in kwargs:
            user_attrs[f"__{key}__"] = str(kwargs.pop(key))
    inputs, attrs = bind_arguments(spec.fn, op, tuple(args), kwargs,
                                   lambda v: isinstance(v, Symbol))
    entries = []
    for sym in inputs:
        if len(sym._outputs) != 1:
            raise ValueError(f"{op}: an input must have one output, got a group of "
                             f"{len(sym._outputs)}")
        entries.append(sym._outputs[0])
    graph_op = CANONICAL.get(op, op)  # the name MXNet writes in the JSON
    if graph_op != op and generic_spec(graph_op) is None:
        graph_op = op
    node_name = _name.current().get(name, op.lower())
    attrs.update(_attribute.current().get(user_attrs))
    node = _Node(graph_op, node_name, attrs, entries)
    node.params()
    return Symbol([(node, i) for i in range(node.visible_outputs())])


def compose(symbol: Symbol, mapping: dict[str, Symbol]) -> Symbol:
    copies: dict[int, tuple[_Node, int] | _Node] = {}
    for node in symbol._nodes():
        if node.op is None and node.name in mapping:
            replacement = mapping[node.name]
            if not isinstance(replacement, Symbol) or len(replacement._outputs) != 1:
                raise TypeError(f"compose: {node.name!r} must be replaced by one Symbol")
            copies[id(node)] = replacement._outputs[0]
            continue
        if node.op is None:
            copies[id(node)] = node
            continue
        inputs = []
        for child, index in node.inputs:
            new = copies[id(child)]
            inputs.append(new if isinstance(new, tuple) else (new, index))
        copies[id(node)] = _Node(node.op, node.name, node.attrs, inputs)
    outs = []
    for node, index in symbol._outputs:
        new = copies[id(node)]
        outs.append(new if isinstance(new, tuple) else (new, index))
    return Symbol(outs)
