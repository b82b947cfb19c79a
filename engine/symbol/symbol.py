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

import threading
from collections.abc import Iterable, Sequence
from typing import Any

from ..ndarray import NDArray
from .ops import OPS, OpSpec, to_attr_string

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


class _NameState(threading.local):
    def __init__(self) -> None:
        self.current: NameManager | None = None


_name_state = _NameState()


class NameManager:
    """Numbers unnamed operators per type (``fullyconnected0``, ``fullyconnected1``, ...).

    Used as a context manager it starts fresh counters for the symbols built inside, as
    ``mx.name.NameManager`` does:

    >>> import engine as mx
    >>> with NameManager():
    ...     mx.sym.Activation(mx.sym.var('x'), act_type='relu').name
    'activation0'
    """

    def __init__(self) -> None:
        self.counter: dict[str, int] = {}
        self._previous: NameManager | None = None

    def get(self, name: str | None, hint: str) -> str:
        if name:
            return name
        count = self.counter.get(hint, 0)
        self.counter[hint] = count + 1
        return f"{hint}{count}"

    @staticmethod
    def current() -> NameManager:
        if _name_state.current is None:
            _name_state.current = NameManager()
        return _name_state.current

    def __enter__(self) -> NameManager:
        self._previous = NameManager.current()
        _name_state.current = self
        return self

    def __exit__(self, *exc: object) -> None:
        _name_state.current = self._previous


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


class Symbol:
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
        return [node.name if node.op is None else f"{node.name}_output"
                for node, _ in self._outputs]

    def get_internals(self) -> Symbol:
        """Every node's output as one grouped symbol (select with ``['name_output']``)."""
        return Symbol([(n, 0) for n in self._nodes()])

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
        return self._outputs[0][0].attrs.get(key) if len(self._outputs) == 1 else None

    def attr_dict(self) -> dict[str, dict[str, str]]:
        return {n.name: dict(n.attrs) for n in self._nodes() if n.attrs}

    def __repr__(self) -> str:
        name = self.name
        return f"<Symbol {name}>" if name else f"<Symbol group [{', '.join(self.list_outputs())}]>"

    # ------------------------------------------------------------------ arithmetic
    def _binary(self, other: Any, op: str, scalar_op: str) -> Symbol:
        if isinstance(other, Symbol):
            return _make_op(op, [self, other], {}, None)
        return _make_op(scalar_op, [self], {"scalar": other}, None)

    def __add__(self, other: Any) -> Symbol:
        return self._binary(other, "elemwise_add", "_plus_scalar")

    def __radd__(self, other: Any) -> Symbol:
        return self.__add__(other)

    def __sub__(self, other: Any) -> Symbol:
        return self._binary(other, "elemwise_sub", "_minus_scalar")

    def __rsub__(self, other: Any) -> Symbol:
        return _make_op("_rminus_scalar", [self], {"scalar": other}, None)

    def __mul__(self, other: Any) -> Symbol:
        return self._binary(other, "elemwise_mul", "_mul_scalar")

    def __rmul__(self, other: Any) -> Symbol:
        return self.__mul__(other)

    def __truediv__(self, other: Any) -> Symbol:
        return self._binary(other, "elemwise_div", "_div_scalar")

    def __rtruediv__(self, other: Any) -> Symbol:
        return _make_op("_rdiv_scalar", [self], {"scalar": other}, None)

    def __pow__(self, other: Any) -> Symbol:
        if isinstance(other, Symbol):
            raise TypeError("Symbol ** Symbol is not supported; use a scalar exponent")
        return _make_op("_power_scalar", [self], {"scalar": other}, None)

    def __neg__(self) -> Symbol:
        return _make_op("negative", [self], {}, None)

    # ------------------------------------------------------------------- shapes
    def infer_shape(self, *args: Any, **kwargs: Shape) -> tuple[Any, Any, Any]:
        """``(arg_shapes, out_shapes, aux_shapes)`` from known input shapes, or
        ``(None, None, None)`` when they do not determine every shape."""
        arg, out, aux = self.infer_shape_partial(*args, **kwargs)
        if any(s is None for s in arg + out + aux):
            return None, None, None
        return arg, out, aux

    def infer_shape_partial(self, *args: Any, **kwargs: Shape) -> tuple[Any, Any, Any]:
        """Like :meth:`infer_shape`, with None for shapes that stay unknown."""
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
        out = [shapes.get(id(node)) if node.op is not None else known.get(node.name)
               for node, _ in self._outputs]
        return arg, out, aux

    def _propagate(self, known: dict[str, Shape]) -> dict[int, Shape | None]:
        out: dict[int, Shape | None] = {}
        for node in self._nodes():
            if node.op is None:
                out[id(node)] = known.get(node.name)
                continue
            in_shapes = [out.get(id(child)) for child, _ in node.inputs]
            try:
                filled, result = node.spec.infer(node.params(), in_shapes)
            except (TypeError, IndexError, ZeroDivisionError) as exc:
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
                    out[id(child)] = known[child.name]
            out[id(node)] = result
        return out

    def infer_type(self, *args: Any, **kwargs: Any) -> tuple[list[Any], list[Any], list[Any]]:
        """``(arg_types, out_types, aux_types)``: the given dtypes, float32 elsewhere (every
        operator here keeps its input's dtype)."""
        import numpy

        given = {**dict(zip(self.list_arguments(), args, strict=False)), **kwargs}
        default = numpy.dtype(given.get(self.list_arguments()[0], numpy.float32)).type \
            if self.list_arguments() else numpy.float32
        arg = [numpy.dtype(given.get(n, default)).type for n in self.list_arguments()]
        aux = [numpy.dtype(given.get(n, default)).type for n in self.list_auxiliary_states()]
        return arg, [default] * len(self._outputs), aux

    # --------------------------------------------------------------- evaluation
    def _evaluate(self, values: dict[str, NDArray]) -> list[NDArray]:
        """Run the graph on NDArrays (recorded when autograd is recording)."""
        results: dict[int, NDArray] = {}
        for node in self._nodes():
            if node.op is None:
                try:
                    results[id(node)] = values[node.name]
                except KeyError:
                    raise ValueError(f"no value bound for input {node.name!r}") from None
                continue
            inputs = [results[id(child)] for child, _ in node.inputs]
            results[id(node)] = node.spec.forward(node.params(), inputs)
        return [results[id(node)] for node, _ in self._outputs]

    def eval(self, ctx: Any = None, **kwargs: NDArray) -> list[NDArray]:
        """Evaluate with NDArray inputs given by name (``sym.eval(data=x, ...)``)."""
        return self._evaluate(kwargs)

    # ----------------------------------------------------------------- json I/O
    def tojson(self) -> str:
        """MXNet's JSON graph (``nodes``, ``arg_nodes``, ``node_row_ptr``, ``heads``)."""
        from .serialization import to_json

        return to_json(self)

    def save(self, fname: str, remove_amp_cast: bool = True) -> None:
        """Write :meth:`tojson` to ``fname`` (``prefix-symbol.json``)."""
        with open(fname, "w") as handle:
            handle.write(self.tojson())


def Variable(name: str, attr: dict[str, str] | None = None, shape: Any = None,  # noqa: N802
             lr_mult: float | None = None, wd_mult: float | None = None, dtype: Any = None,
             init: Any = None, **kwargs: Any) -> Symbol:
    """A named input of the graph (data, label or parameter)."""
    if not isinstance(name, str) or not name:
        raise ValueError("a Variable needs a non-empty string name")
    attrs = {str(k): str(v) for k, v in (attr or {}).items()}
    if shape is not None:
        attrs["__shape__"] = to_attr_string(tuple(shape))
    if lr_mult is not None:
        attrs["__lr_mult__"] = str(lr_mult)
    if wd_mult is not None:
        attrs["__wd_mult__"] = str(wd_mult)
    if dtype is not None:
        attrs["__dtype__"] = str(dtype)
    if init is not None:
        attrs["__init__"] = init if isinstance(init, str) else init.dumps()
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


def _make_op(op: str, args: Sequence[Any], kwargs: dict[str, Any], name: str | None,
             attr: dict[str, str] | None = None) -> Symbol:
    """Create an operator node; missing inputs become variables ``<name>_<input>``."""
    spec = OPS[op]
    symbol_kwargs = {k: v for k, v in kwargs.items() if isinstance(v, Symbol)}
    attrs = {k: to_attr_string(v) for k, v in kwargs.items()
             if not isinstance(v, Symbol) and v is not None}
    if spec.variadic:
        inputs = [a for a in args if isinstance(a, Symbol)]
        if args and len(args) == 1 and isinstance(args[0], (list, tuple)):
            inputs = list(args[0])
        attrs.setdefault("num_args", str(len(inputs)))
        arg_names: tuple[str, ...] = tuple(f"arg{i}" for i in range(len(inputs)))
    else:
        params = spec.parse(attrs)
        arg_names = spec.input_names(params) + spec.aux
        if len(args) > len(arg_names):
            raise TypeError(f"{op} takes at most {len(arg_names)} inputs, got {len(args)}")
        for key in symbol_kwargs:
            if key not in arg_names:
                raise TypeError(f"{op} has no input {key!r}; inputs are {list(arg_names)}")
        inputs = list(args) + [None] * (len(arg_names) - len(args))
        for i, key in enumerate(arg_names):
            if key in symbol_kwargs:
                inputs[i] = symbol_kwargs[key]
    node_name = NameManager.current().get(name, spec.hint or op.lower())
    entries = []
    for key, sym in zip(arg_names, inputs, strict=True):
        if sym is None:
            init = spec.aux_init.get(key)
            sym = Variable(f"{node_name}_{key}", attr={"__init__": init} if init else None)
        if not isinstance(sym, Symbol):
            raise TypeError(f"{op} input {key!r} must be a Symbol, got {type(sym).__name__}")
        if len(sym._outputs) != 1:
            raise ValueError(f"{op} input {key!r} must have one output, got a group of "
                             f"{len(sym._outputs)}")
        entries.append(sym._outputs[0])
    if attr:
        attrs.update({str(k): str(v) for k, v in attr.items()})
    node = _Node(op, node_name, attrs, entries)
    node.params()
    return Symbol([(node, 0)])
