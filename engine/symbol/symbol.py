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

import warnings
from collections.abc import Iterable, Sequence
from typing import Any

from ..attribute import HIDDEN_KEYS, dunder
from ..ndarray import NDArray
from .arithmetic import SymbolArithmetic
from .ops import OPS, OpSpec
from .protocol import SymbolProtocol

Shape = tuple[int, ...]


class ShapeInferenceError(ValueError):
    """Shapes do not fit at one node of the graph, named by ``node``."""

    def __init__(self, message: str, node: str) -> None:
        super().__init__(message)
        self.node = node


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
        if not self.name:  # an unnamed (atomic) operator: MXNet lists the bare suffixes
            return list(suffixes)
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


def _complete(shape: Any) -> bool:
    return shape is not None and -1 not in shape


class Symbol(SymbolArithmetic, SymbolProtocol):
    """A symbolic output list; combine with operators and ``engine.symbol`` functions."""

    def __init__(self, outputs: Sequence[tuple[_Node, int]]) -> None:
        self._outputs = list(outputs)
        self._order: list[_Node] | None = None  # graphs never change once built
        self._deferred: list[_Node] | None = None  # see _resolved_creation_nodes
        self._resolved: dict[int, _Node] = {}
        self._resolved_key: Any = None

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
        """The inputs of the output nodes (each node once), grouped; None for a variable."""
        nodes = list({id(node): node for node, _ in self._outputs}.values())
        children = [entry for node in nodes for entry in node.inputs]
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

    # ------------------------------------------------------------- shapes, types
    def infer_shape(self, *args: Any, **kwargs: Any) -> tuple[Any, Any, Any]:
        """``(arg_shapes, out_shapes, aux_shapes)`` from known input shapes (tuples, by
        position or by name; 0 marks an unknown size, -1 under ``mx.np_shape()``), or
        ``(None, None, None)`` with a warning naming the arguments left undetermined.
        Shapes that contradict each other raise ``MXNetError`` naming the operator."""
        from .inference_api import infer_shapes, shape_report

        result = infer_shapes(self, args, kwargs)
        if all(_complete(s) for part in result for s in part):
            return shape_report(result)
        unknown = [f"{name}: {shown}" for name, shape, shown in
                   zip(self.list_arguments(), result[0], shape_report(result)[0], strict=True)
                   if not _complete(shape)]
        warnings.warn("Cannot decide shape for the following arguments (0s in shape means "
                      "unknown dimensions). Consider providing them as input:\n\t"
                      + "\n\t".join(unknown[:10] + (["..."] if len(unknown) > 10 else [])),
                      stacklevel=2)
        return None, None, None

    def infer_shape_partial(self, *args: Any, **kwargs: Any) -> tuple[Any, Any, Any]:
        """Like :meth:`infer_shape`, returning what can be inferred: an unknown shape is
        ``()`` and an unknown size 0 (``None`` and -1 under ``mx.np_shape()``)."""
        from .inference_api import infer_shapes, shape_report

        return shape_report(infer_shapes(self, args, kwargs))

    def _infer_shapes(self, *args: Any, **kwargs: Any) -> tuple[Any, Any, Any]:
        """The engine's own form: every shape a tuple of known sizes, or None (unknown in
        part or whole); inputs may be any int sequences, sizes are always real sizes."""
        if args:
            kwargs = {**dict(zip(self.list_arguments(), args, strict=False)), **kwargs}
        return self._infer_shapes_observed(kwargs)

    def _infer_shapes_observed(self, given: dict[str, Any], observe: Any = None
                               ) -> tuple[Any, Any, Any]:
        """:meth:`_infer_shapes` from ``given`` (input name -> shape); ``observe(node,
        input_shapes, output_shapes)``, when given, sees each operator node once, as soon as
        its output shapes are complete (in the first, forward sweep: before the next node is
        inferred, so a bound can stop there). A contradiction raises
        :class:`ShapeInferenceError` naming the node."""
        from .inference_api import infer_shapes

        known = {k: tuple(int(d) for d in v) for k, v in given.items() if v is not None}
        return tuple(  # type: ignore[return-value]
            [s if _complete(s) else None for s in part]
            for part in infer_shapes(self, (), known, literal=True, observe=observe))

    def infer_type(self, *args: Any, **kwargs: Any) -> tuple[Any, Any, Any]:
        """``(arg_types, out_types, aux_types)`` as numpy type classes from known input
        dtypes, or ``(None, None, None)`` with a warning when some stay undetermined."""
        from .inference_api import infer_types

        arg, out, aux = infer_types(self, args, kwargs)
        if all(t is not None for t in arg + out + aux):
            return arg, out, aux
        unknown = [f"{name}: None" for name, t in zip(self.list_arguments(), arg, strict=True)
                   if t is None]
        warnings.warn("Cannot decide type for the following arguments. Consider providing "
                      "them as input:\n\t" + "\n\t".join(unknown[:10]), stacklevel=2)
        return None, None, None

    def infer_type_partial(self, *args: Any, **kwargs: Any) -> tuple[Any, Any, Any]:
        """Like :meth:`infer_type`, with None for the dtypes that stay unknown."""
        from .inference_api import infer_types

        return infer_types(self, args, kwargs)

    # --------------------------------------------------------------- evaluation
    def _evaluate(self, values: dict[str, NDArray], monitor: Any = None,
                  run_node: Any = None) -> list[NDArray]:
        """Run the graph on NDArrays (recorded when autograd is recording). ``monitor``, when
        given, is a :class:`~engine.symbol.monitoring.Monitored` that sees every operator's
        inputs and outputs (MXNet's executor monitor callback). ``run_node(node, inputs)``,
        when given, computes each operator node instead of ``node.spec.forward`` (a
        hybridize trace records each node through it)."""
        results: dict[int, list[NDArray]] = {}
        if monitor is not None:
            monitor.begin()
        resolved = self._resolved_creation_nodes(values)
        for node in self._nodes():
            if node.op is None:
                try:
                    results[id(node)] = [values[node.name]]
                except KeyError:
                    raise ValueError(f"no value bound for input {node.name!r}") from None
                continue
            inputs = [results[id(child)][index] for child, index in node.inputs]
            if monitor is not None:
                inputs = monitor.before(node, inputs)
            runs = resolved.get(id(node), node) if resolved else node
            result = runs.spec.forward(runs.params(), inputs) if run_node is None \
                else run_node(runs, inputs)
            results[id(node)] = list(result) if isinstance(result, (list, tuple)) else [result]
            if monitor is not None:
                monitor.after(node, results[id(node)])
        return [results[id(node)][index] for node, index in self._outputs]

    def _resolved_creation_nodes(self, values: dict[str, NDArray]) -> dict[int, _Node]:
        """Creation nodes with sizes left to shape inference (``symbol.zeros(shape=(0, 4))``,
        the begin states of an unrolled cell), resolved for the bound inputs' shapes."""
        from .inference_api import resolved_creation_nodes
        from .shape_rules import deferred_nodes

        if self._deferred is None:
            self._deferred = deferred_nodes(self._nodes())
        if not self._deferred:
            return {}
        shapes = {n.name: values[n.name].shape for n in self._nodes()
                  if n.op is None and n.name in values}
        key = tuple(sorted(shapes.items()))
        if self._resolved_key != key:
            self._resolved = resolved_creation_nodes(self, self._deferred, shapes)
            self._resolved_key = key
        return self._resolved

    def eval(self, ctx: Any = None, **kwargs: NDArray) -> list[NDArray]:
        """Evaluate with NDArray inputs given by name (``sym.eval(data=x, ...)``); under
        ``autograd.record()`` the result is recorded for ``backward``."""
        return self._evaluate(kwargs)

    def bind(self, ctx: Any = None, args: Any = None, args_grad: Any = None,
             grad_req: Any = "write", aux_states: Any = None, group2ctx: Any = None,
             shared_exec: Any = None) -> Any:
        """An :class:`~engine.symbol.executor.Executor` over the given arrays."""
        from .executor import Executor

        return Executor(self, ctx, args, args_grad, grad_req, aux_states, group2ctx)

    def simple_bind(self, ctx: Any = None, grad_req: Any = "write", type_dict: Any = None,
                    stype_dict: Any = None, group2ctx: Any = None, shared_arg_names: Any = None,
                    shared_exec: Any = None, shared_buffer: Any = None, **shapes: Any) -> Any:
        """An executor with zero-filled arrays of the shapes inferred from ``shapes``."""
        from .executor import simple_bind

        return simple_bind(self, ctx, grad_req, type_dict, shapes, group2ctx)

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
