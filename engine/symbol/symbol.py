"""Symbols: MXNet's declarative graphs, evaluated with the engine's NDArray ops.

A :class:`Symbol` is a list of outputs of graph nodes. A node is a variable (``op`` None)
or an operator with input entries and string attributes, exactly as MXNet's
``prefix-symbol.json`` stores them, so files round-trip with MXNet 1.9.

>>> import engine as mx
>>> data = mx.sym.Variable('data')
>>> fc = mx.sym.FullyConnected(data, num_hidden=10, name='fc')
>>> net = mx.sym.SoftmaxOutput(fc, name='softmax')
>>> net.list_arguments()
['data', 'fc_weight', 'fc_bias', 'softmax_label']
>>> net.infer_shape(data=(128, 20))[0]
[(128, 20), (10, 20), (10,), (128,)]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy

from ..attribute import HIDDEN_KEYS, dunder
from ..ndarray import NDArray
from .arithmetic import SymbolArithmetic
from .ops import OPS, OpSpec, dtype_of_flag

Shape = tuple[int, ...]


class _Node:
    __slots__ = ("op", "name", "attrs", "inputs", "_params")

    def __init__(self, op: str | None, name: str, attrs: dict[str, str] | None = None,
                 inputs: Sequence[tuple[_Node, int]] = ()) -> None:
        self.op = op
        self.name = name
        self.attrs = dict(attrs or {})
        self.inputs = list(inputs)
        self._params: dict[str, Any] | None = None

    @property
    def spec(self) -> OpSpec:
        assert self.op is not None
        return OPS[self.op]

    def params(self) -> dict[str, Any]:
        if self._params is None:
            self._params = self.spec.parse(self.attrs)
        return self._params

    def visible_outputs(self) -> int:
        """Outputs a user sees (``split`` has ``num_outputs``; most operators one)."""
        return 1 if self.op is None else self.spec.count_outputs(self.params())

    def output_names(self) -> list[str]:
        if self.op is None:
            return [self.name]
        suffixes = self.spec.output_suffixes(self.params())
        return [f"{self.name}_{suffix}" for suffix in suffixes]


def _topo(heads: Iterable[_Node]) -> list[_Node]:
    """Nodes in MXNet's order: depth-first, inputs in order, each node after its inputs."""
    order: list[_Node] = []
    seen: set[int] = set()
    for head in heads:
        stack: list[tuple[_Node, int]] = [(head, 0)]
        while stack:
            node, i = stack.pop()
            if i == 0 and id(node) in seen:
                continue
            if i < len(node.inputs):
                stack.append((node, i + 1))
                child = node.inputs[i][0]
                if id(child) not in seen:
                    stack.append((child, 0))
            else:
                if id(node) not in seen:
                    seen.add(id(node))
                    order.append(node)
    return order


def _parse_shape(text: str) -> Shape:
    from .ops import _tuple

    return _tuple(text)


class Symbol(SymbolArithmetic):
    """A symbolic output list; combine with operators and ``engine.symbol`` functions."""

    def __init__(self, outputs: Sequence[tuple[_Node, int]]) -> None:
        self._outputs = list(outputs)
        self._order: list[_Node] | None = None  # graphs never change once built

    # ------------------------------------------------------------------ structure
    @property
    def name(self) -> str | None:
        return self._outputs[0][0].name if len(self._outputs) == 1 else None

    def _nodes(self) -> list[_Node]:
        if self._order is None:
            self._order = _topo(node for node, _ in self._outputs)
        return self._order

    def _aux_nodes(self) -> set[int]:
        aux: set[int] = set()
        for node in self._nodes():
            if node.op is None:
                continue
            n_args = len(node.inputs) - len(node.spec.aux)
            for child, _ in node.inputs[n_args:]:
                aux.add(id(child))
        return aux

    def list_arguments(self) -> list[str]:
        """Input variables other than auxiliary states, in graph order."""
        aux = self._aux_nodes()
        return [n.name for n in self._nodes() if n.op is None and id(n) not in aux]

    def list_auxiliary_states(self) -> list[str]:
        aux = self._aux_nodes()
        return [n.name for n in self._nodes() if n.op is None and id(n) in aux]

    def list_inputs(self) -> list[str]:
        return [n.name for n in self._nodes() if n.op is None]

    def list_outputs(self) -> list[str]:
        return [node.output_names()[index] for node, index in self._outputs]

    def get_internals(self) -> Symbol:
        """Every node's output as one grouped symbol (select with ``['name_output']``)."""
        return Symbol([(n, i) for n in self._nodes() for i in range(n.visible_outputs())])

    def get_children(self) -> Symbol | None:
        children = [entry for node, _ in self._outputs for entry in node.inputs]
        return Symbol(children) if children else None

    def __getitem__(self, index: int | str) -> Symbol:
        if isinstance(index, str):
            names = self.list_outputs()
            if index not in names:
                raise ValueError(f"no output named {index!r}; outputs are {names}")
            index = names.index(index)
        return Symbol([self._outputs[index]])

    def __len__(self) -> int:
        return len(self._outputs)

    def __iter__(self) -> Any:
        return (Symbol([entry]) for entry in self._outputs)

    def attr(self, key: str) -> str | None:
        """The attribute ``key`` of this (single-output) symbol's node, or None."""
        if len(self._outputs) != 1:
            return None
        attrs = self._outputs[0][0].attrs
        return attrs.get(key, attrs.get(dunder(key)))

    def list_attr(self, recursive: bool = False) -> dict[str, str]:
        """This node's attributes; ``__key__`` ones also listed as ``key``, as MXNet does."""
        if recursive:
            raise DeprecationWarning("Symbol.list_attr with recursive=True has been deprecated. "
                                     "Please use attr_dict instead.")
        return _with_plain_keys(self._outputs[0][0].attrs) if len(self._outputs) == 1 else {}

    def attr_dict(self) -> dict[str, dict[str, str]]:
        """``{node name: attributes}`` for every node that has attributes."""
        return {n.name: _with_plain_keys(n.attrs) for n in self._nodes() if n.attrs}

    def _set_attr(self, **kwargs: str) -> None:
        for key, value in kwargs.items():
            if not isinstance(value, str):
                raise ValueError("Set Attr only accepts string values")
            for node, _ in self._outputs:
                node.attrs[key] = value

    def __repr__(self) -> str:
        name = self.name
        return f"<Symbol {name}>" if name else f"<Symbol group [{', '.join(self.list_outputs())}]>"

    # ------------------------------------------------------------------- shapes
    def infer_shape(self, *args: Any, **kwargs: Shape) -> tuple[Any, Any, Any]:
        """``(arg_shapes, out_shapes, aux_shapes)`` from known input shapes, or
        ``(None, None, None)`` when they do not determine every shape."""
        arg, out, aux = self._infer_shapes(*args, **kwargs)
        if any(s is None for s in arg + out + aux):
            return None, None, None
        return arg, out, aux

    def infer_shape_partial(self, *args: Any, **kwargs: Shape) -> tuple[Any, Any, Any]:
        """Like :meth:`infer_shape`, with ``()`` for shapes that stay unknown (a variable's
        declared shape, zeros for its unknown sizes, when it has one), as MXNet returns."""
        arg, out, aux = self._infer_shapes(*args, **kwargs)
        declared = {n.name: _parse_shape(n.attrs["__shape__"]) for n in self._nodes()
                    if n.op is None and "__shape__" in n.attrs}
        arg = [s if s is not None else declared.get(name, ())
               for name, s in zip(self.list_arguments(), arg, strict=True)]
        aux = [s if s is not None else declared.get(name, ())
               for name, s in zip(self.list_auxiliary_states(), aux, strict=True)]
        return arg, [s if s is not None else () for s in out], aux

    def _infer_shapes(self, *args: Any, **kwargs: Shape) -> tuple[Any, Any, Any]:
        """Known shapes, None for the unknown ones."""
        if args:
            kwargs = {**dict(zip(self.list_arguments(), args, strict=False)), **kwargs}
        known: dict[str, Shape] = {}
        for node in self._nodes():  # shapes declared on variables: Variable(shape=...)
            if node.op is None and "__shape__" in node.attrs:
                declared = _parse_shape(node.attrs["__shape__"])
                if all(d > 0 for d in declared):
                    known[node.name] = declared
        for key, value in kwargs.items():
            if value is not None:
                known[key] = tuple(int(v) for v in value)
        inputs = set(self.list_inputs())
        unknown_keys = [k for k in known if k not in inputs]
        if unknown_keys:
            raise ValueError(f"infer_shape: {unknown_keys} are not inputs of this symbol; "
                             f"inputs are {sorted(inputs)}")
        shapes = self._propagate(known)
        arg = [known.get(n) for n in self.list_arguments()]
        aux = [known.get(n) for n in self.list_auxiliary_states()]
        out = [shapes[id(node)][index] for node, index in self._outputs]
        return arg, out, aux

    def _propagate(self, known: dict[str, Shape]) -> dict[int, list[Shape | None]]:
        out: dict[int, list[Shape | None]] = {}
        for node in self._nodes():
            if node.op is None:
                out[id(node)] = [known.get(node.name)]
                continue
            in_shapes = [out[id(child)][index] for child, index in node.inputs]
            try:
                filled, result = node.spec.infer(node.params(), in_shapes)
            except (TypeError, IndexError, ZeroDivisionError, ValueError) as exc:
                raise ValueError(f"{node.op} {node.name!r}: cannot infer shapes from inputs "
                                 f"{in_shapes}: {exc}") from None
            for (child, _), shape, old in zip(node.inputs, filled, in_shapes, strict=False):
                if shape is None:
                    continue
                if old is not None and tuple(old) != tuple(shape):
                    raise ValueError(
                        f"{node.op} {node.name!r}: input {child.name!r} has shape {old} but "
                        f"{tuple(shape)} is expected"
                    )
                if child.op is None:
                    known.setdefault(child.name, tuple(shape))
                    out[id(child)] = [known[child.name]]
            count = node.visible_outputs()
            if result is None or isinstance(result, tuple):
                out[id(node)] = [result] * count if result is None else [result]
            else:
                out[id(node)] = list(result)
        return out

    def infer_type(self, *args: Any, **kwargs: Any) -> tuple[Any, Any, Any]:
        """``(arg_types, out_types, aux_types)`` as numpy type classes. Unknown inputs take
        the first given dtype (float32 when none is given); outputs follow their operator's
        rule (``Cast``/``cast`` its ``dtype``, index ops float32, the rest their input's)."""
        given = {**dict(zip(self.list_arguments(), args, strict=False)), **kwargs}
        given = {k: numpy.dtype(v) for k, v in given.items() if v is not None}
        declared = [n.attrs["__dtype__"] for n in self._nodes()
                    if n.op is None and "__dtype__" in n.attrs]
        if not given and not declared:  # nothing to start from, as MXNet answers
            return None, None, None
        default = next(iter(given.values()), dtype_of_flag(declared[0]) if declared
                       else numpy.dtype(numpy.float32))
        types: dict[int, list[Any]] = {}
        for node in self._nodes():
            if node.op is None:
                flag = node.attrs.get("__dtype__")
                dtype = given.get(node.name, dtype_of_flag(flag) if flag else default)
                types[id(node)] = [dtype]
                continue
            in_types = [types[id(child)][index] for child, index in node.inputs]
            dtype = node.spec.out_dtype(node.params(), in_types, default)
            types[id(node)] = [dtype] * node.visible_outputs()
        by_name = {n.name: types[id(n)][0] for n in self._nodes() if n.op is None}
        arg = [by_name[n].type for n in self.list_arguments()]
        aux = [by_name[n].type for n in self.list_auxiliary_states()]
        out = [types[id(node)][index].type for node, index in self._outputs]
        return arg, out, aux

    def infer_type_partial(self, *args: Any, **kwargs: Any) -> tuple[Any, Any, Any]:
        arg, out, aux = self.infer_type(*args, **kwargs)
        if arg is None:
            return ([None] * len(self.list_arguments()), [None] * len(self._outputs),
                    [None] * len(self.list_auxiliary_states()))
        return arg, out, aux

    # --------------------------------------------------------------- evaluation
    def _evaluate(self, values: dict[str, NDArray], monitor: Any = None,
                  run_node: Any = None) -> list[NDArray]:
        """Run the graph on NDArrays (recorded when autograd is recording). ``monitor``,
        when given, is called ``(name, array)`` with every operator output, MXNet's
        executor monitor callback (``monitor.monitor_all`` adds the operators' inputs).
        ``run_node(node, inputs)``, when given, computes each operator node instead of
        ``node.spec.forward`` (a hybridize trace records each node through it)."""
        results: dict[int, list[NDArray]] = {}
        for node in self._nodes():
            if node.op is None:
                try:
                    results[id(node)] = [values[node.name]]
                except KeyError:
                    raise ValueError(f"no value bound for input {node.name!r}") from None
                continue
            inputs = [results[id(child)][index] for child, index in node.inputs]
            if monitor is not None and getattr(monitor, "monitor_all", False):
                names = node.spec.input_names(node.params(), len(inputs)) + node.spec.aux
                for input_name, array in zip(names, inputs, strict=False):
                    monitor(f"{node.name}_{input_name}", array)
            result = node.spec.forward(node.params(), inputs) if run_node is None \
                else run_node(node, inputs)
            results[id(node)] = list(result) if isinstance(result, (list, tuple)) else [result]
            if monitor is not None:
                for name, array in zip(node.output_names(), results[id(node)], strict=False):
                    monitor(name, array)
        return [results[id(node)][index] for node, index in self._outputs]

    def eval(self, ctx: Any = None, **kwargs: NDArray) -> list[NDArray]:
        """Evaluate with NDArray inputs given by name (``sym.eval(data=x, ...)``); under
        ``autograd.record()`` the result is recorded for ``backward``."""
        return self._evaluate(kwargs)

    def bind(self, ctx: Any = None, args: Any = None, args_grad: Any = None,
             grad_req: Any = "write", aux_states: Any = None, **_: Any) -> Any:
        """An :class:`~engine.symbol.executor.Executor` over the given arrays."""
        from .executor import Executor

        return Executor(self, ctx, args, args_grad, grad_req, aux_states)

    def simple_bind(self, ctx: Any = None, grad_req: Any = "write", type_dict: Any = None,
                    **shapes: Any) -> Any:
        """An executor with zero-filled arrays of the shapes inferred from ``shapes``."""
        from .executor import simple_bind

        return simple_bind(self, ctx, grad_req, type_dict, shapes)

    def __call__(self, *args: Symbol, **kwargs: Symbol) -> Symbol:
        """A copy of this graph with variables replaced by the given symbols (by name)."""
        from .build import compose

        names = self.list_arguments()
        mapping = dict(zip(names, args, strict=False))
        mapping.update(kwargs)
        return compose(self, mapping)

    # ----------------------------------------------------------------- json I/O
    def tojson(self, remove_amp_cast: bool = True) -> str:
        """MXNet's JSON graph (``nodes``, ``arg_nodes``, ``node_row_ptr``, ``heads``)."""
        from .serialization import to_json

        return to_json(self)

    def save(self, fname: str, remove_amp_cast: bool = True) -> None:
        """Write :meth:`tojson` to ``fname`` (``prefix-symbol.json``)."""
        with open(fname, "w") as handle:
            handle.write(self.tojson())

    def __copy__(self) -> Symbol:
        return Symbol(self._outputs)

    def __deepcopy__(self, memo: Any) -> Symbol:
        from .serialization import load_json

        return load_json(self.tojson())

    def astype(self, dtype: Any) -> Symbol:
        """This symbol cast to ``dtype`` (MXNet's ``Cast``)."""
        from .build import make_generic

        return make_generic("Cast", (self,), {"dtype": dtype}, None)

    def __getattr__(self, name: str) -> Any:
        # Fluent methods (``x.sum(axis=1)``, ``x.reshape((0, -1))``): the namespace op with
        # this symbol as its first input.
        if name.startswith("_"):
            raise AttributeError(name)
        from . import _fluent

        fn = _fluent(name)
        if fn is None:
            raise AttributeError(f"'Symbol' object has no attribute {name!r}")
        return lambda *args, **kwargs: fn(self, *args, **kwargs)


# MXNet lists these attributes under their plain names too, and accepts them as keyword
# arguments of any operator (stored as ``__key__``).
_HIDDEN_KEYS = HIDDEN_KEYS


def _with_plain_keys(attrs: dict[str, str]) -> dict[str, str]:
    out = dict(attrs)
    for key in _HIDDEN_KEYS:
        if f"__{key}__" in attrs:
            out[key] = attrs[f"__{key}__"]
    return out
