"""``Executor``: a symbol bound to arrays (``Symbol.bind``/``simple_bind``).

As in MXNet, the arrays are fixed at bind: the arguments, their gradients and the
auxiliary states are the given (or allocated) NDArrays, and the outputs are allocated from
the inferred shapes, so ``exe.outputs`` and ``exe.grad_dict`` are the same objects before
and after every ``forward``/``backward``, which write into them.

``forward`` runs the graph as a compiled program (:mod:`.compiled_graph`: traced on the
first call of each input signature, then replayed with reused buffers and fused kernels);
with a monitor callback installed, or for a graph that cannot be traced, it evaluates the
graph node by node with NDArray ops. It is recorded for ``backward`` whenever some
argument wants a gradient, in training mode or not (MXNet runs ``backward`` after a plain
``forward()`` too, with the operators in inference mode).

>>> import engine as mx
>>> x = mx.sym.var('x')
>>> ex = (x * 2).simple_bind(mx.cpu(), x=(2,))
>>> out = ex.outputs[0]
>>> ex.arg_dict['x'][:] = 3
>>> ex.forward()[0] is out, out.asnumpy().tolist()
(True, [6.0, 6.0])
>>> ex.backward(mx.nd.ones((2,))); ex.grad_dict['x'].asnumpy().tolist()
[2.0, 2.0]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy

from .. import autograd
from ..base import MXNetError
from ..ndarray import NDArray, zeros
from .compiled_graph import CompiledGraph
from .monitoring import Monitored


def _as_dict(names: list[str], arrays: Any, what: str) -> dict[str, NDArray]:
    if arrays is None:
        return {}
    if isinstance(arrays, Mapping):
        return {k: v for k, v in arrays.items() if v is not None}
    arrays = list(arrays)
    if len(arrays) != len(names):
        raise ValueError(f"{what}: expected {len(names)} arrays ({names}), got {len(arrays)}")
    return {n: a for n, a in zip(names, arrays, strict=True) if a is not None}


def _grad_reqs(names: list[str], grad_req: Any) -> dict[str, str]:
    if isinstance(grad_req, str):
        return {n: grad_req for n in names}
    if isinstance(grad_req, Mapping):
        return {n: grad_req.get(n, "null") for n in names}
    return dict(zip(names, grad_req, strict=True))


class Executor:
    """Arrays bound to a symbol's inputs, with ``forward``/``backward`` over them."""

    def __init__(self, symbol: Any, ctx: Any, args: Any, args_grad: Any, grad_req: Any,
                 aux_states: Any, group2ctx: Any = None) -> None:
        self._symbol = symbol
        self._ctx = ctx
        self._group2ctx = group2ctx
        arg_names = symbol.list_arguments()
        self.arg_dict = _as_dict(arg_names, args, "args")
        missing = [n for n in arg_names if n not in self.arg_dict]
        if missing:
            raise ValueError(f"bind: no arrays for arguments {missing}")
        self.aux_dict = _as_dict(symbol.list_auxiliary_states(), aux_states, "aux_states")
        self._grad_req = _grad_reqs(arg_names, grad_req)
        given_grads = _as_dict(arg_names, args_grad, "args_grad")
        self.grad_dict: dict[str, NDArray] = {}
        for name in arg_names:
            req = self._grad_req.get(name, "null")
            if req == "null" or (args_grad is not None and name not in given_grads):
                continue
            array = self.arg_dict[name]
            array.attach_grad(req)
            if name in given_grads:  # backward writes into the caller's array
                array._grad = given_grads[name]
            self.grad_dict[name] = array.grad
        self._wants_grad = bool(self.grad_dict)
        self._monitor: Any = None
        self._compiled = CompiledGraph(symbol)
        self._heads: list[NDArray] = []  # the last forward's recorded results
        self.outputs = self._allocate_outputs()

    def _allocate_outputs(self) -> list[NDArray]:
        shapes = {n: a.shape for n, a in {**self.arg_dict, **self.aux_dict}.items()}
        _, out_shapes, _ = self._symbol._infer_shapes(**shapes)
        types = {n: a.dtype for n, a in {**self.arg_dict, **self.aux_dict}.items()}
        try:
            _, out_types, _ = self._symbol.infer_type_partial(**types)
        except MXNetError:
            out_types = [None] * len(out_shapes)
        ctx = next(iter(self.arg_dict.values())).context if self.arg_dict else self._ctx
        return [zeros(shape or (1,), ctx=ctx, dtype=dtype or numpy.float32)
                for shape, dtype in zip(out_shapes, out_types, strict=True)]

    def set_monitor_callback(self, callback: Any, monitor_all: bool = False) -> None:
        """Call ``callback(name, array)`` with every operator output of each forward."""
        self._monitor = Monitored(callback, monitor_all)

    @property
    def arg_arrays(self) -> list[NDArray]:
        return [self.arg_dict[n] for n in self._symbol.list_arguments()]

    @property
    def grad_arrays(self) -> list[NDArray | None]:
        return [self.grad_dict.get(n) for n in self._symbol.list_arguments()]

    @property
    def aux_arrays(self) -> list[NDArray]:
        return [self.aux_dict[n] for n in self._symbol.list_auxiliary_states()]

    @property
    def output_dict(self) -> dict[str, NDArray]:
        return dict(zip(self._symbol.list_outputs(), self.outputs, strict=True))

    def forward(self, is_train: bool = False, **kwargs: Any) -> list[NDArray]:
        """Compute the outputs into :attr:`outputs`; ``kwargs`` first overwrite bound
        arguments by name."""
        for name, value in kwargs.items():
            if name not in self.arg_dict:
                raise ValueError(f"forward: {name!r} is not an argument of the symbol")
            self.arg_dict[name][:] = value
        values = {**self.arg_dict, **self.aux_dict}
        is_train = bool(is_train)
        record = is_train or self._wants_grad
        heads = None
        if self._monitor is None:
            heads = self._compiled.forward(values, is_train, record)
        if heads is None:
            with (autograd.record(train_mode=is_train) if record
                  else autograd.predict_mode()):
                heads = self._symbol._evaluate(values, self._monitor)
        self._heads = heads
        self._store(heads)
        return self.outputs

    def _store(self, heads: list[NDArray]) -> None:
        """Write the results into the output arrays (a new array where a shape changed)."""
        for i, head in enumerate(heads):
            out = self.outputs[i] if i < len(self.outputs) else None
            if out is not None and out.shape == head.shape and out.dtype == head.dtype:
                out.raw[...] = head.raw
            elif i < len(self.outputs):
                self.outputs[i] = head.detach()
            else:
                self.outputs.append(head.detach())

    def backward(self, out_grads: Any = None, is_train: bool = True) -> None:
        """Gradients of the last forward's outputs into the bound gradient arrays
        (``out_grads`` one per output, by position or by output name; ones by default)."""
        if not self._heads:
            raise RuntimeError("backward needs a forward first")
        if not self._wants_grad:
            return
        if out_grads is None:
            grads: list[Any] = [None] * len(self._heads)
        elif isinstance(out_grads, NDArray):
            grads = [out_grads]
        elif isinstance(out_grads, Mapping):
            grads = [out_grads[k] for k in self._symbol.list_outputs()]
        else:
            grads = list(out_grads)
        pairs = [(h, g) for h, g in zip(self._heads, grads, strict=False)
                 if h._node is not None or h._grad_req != "null"]
        arrays = [self.arg_dict[n] for n in self.grad_dict]
        for array in arrays:
            array._fresh_grad = False
        if pairs:
            autograd.backward([h for h, _ in pairs], [g for _, g in pairs],
                              train_mode=is_train)
        if self._monitor is not None:
            self._monitor.after_backward()
        for array in arrays:  # MXNet writes a zero gradient where the outputs do not reach
            if not array._fresh_grad and array._grad_req == "write":
                array.grad.raw[...] = 0

    def copy_params_from(self, arg_params: Mapping[str, NDArray],
                         aux_params: Mapping[str, NDArray] | None = None,
                         allow_extra_params: bool = False) -> None:
        for table, source in ((self.arg_dict, arg_params), (self.aux_dict, aux_params or {})):
            for name, value in source.items():
                if name in table:
                    table[name][:] = value
                elif not allow_extra_params:
                    raise ValueError(f"Find name {name} that is not in the arguments")

    def reshape(self, partial_shaping: bool = False, allow_up_sizing: bool = False,
                **kwargs: Any) -> Executor:
        """A new executor for other input shapes, sharing memory with this one: arrays
        whose shape stays are the same arrays, smaller ones are views of this executor's
        (``allow_up_sizing`` allows new, larger ones; ``partial_shaping`` allows arguments
        not named to change shape)."""
        from .executor_reshape import reshaped_executor

        return reshaped_executor(self, partial_shaping, allow_up_sizing, kwargs)

    def debug_str(self) -> str:
        """The graph (:meth:`Symbol.debug_str`) and the memory the executor holds."""
        arrays = list(self.arg_dict.values()) + list(self.grad_dict.values()) + \
            list(self.aux_dict.values()) + list(self.outputs)
        total = sum(a.size * numpy.dtype(a.dtype).itemsize for a in arrays)
        return self._symbol.debug_str() + f"Total {total >> 20} MB allocated\n"

    def get_optimized_symbol(self) -> Any:
        """The graph the executor runs (the engine does not rewrite bound graphs)."""
        return self._symbol


def simple_bind(symbol: Any, ctx: Any, grad_req: Any, type_dict: Any,
                shapes: dict[str, Sequence[int]], group2ctx: Any = None) -> Executor:
    """Zero arrays of the inferred shapes and dtypes, then bind. As in MXNet, without a
    ``type_dict`` every argument not declared with a ``dtype`` is float32."""
    arg_shapes, _, aux_shapes = symbol._infer_shapes(**shapes)
    names, aux_names = symbol.list_arguments(), symbol.list_auxiliary_states()
    unknown = [n for n, s in zip(names + aux_names, arg_shapes + aux_shapes, strict=True)
               if s is None]
    if unknown:
        raise ValueError(f"simple_bind: shapes {shapes} do not determine the shapes of "
                         f"{unknown}")
    if type_dict is None:
        attrs = symbol.attr_dict()
        type_dict = {n: numpy.float32 for n in names if "__dtype__" not in attrs.get(n, {})}
    arg_types, _, aux_types = symbol.infer_type_partial(**type_dict)
    args = {n: zeros(s, ctx=ctx, dtype=t or numpy.float32)
            for n, s, t in zip(names, arg_shapes, arg_types, strict=True)}
    aux = {n: zeros(s, ctx=ctx, dtype=t or numpy.float32)
           for n, s, t in zip(aux_names, aux_shapes, aux_types, strict=True)}
    return Executor(symbol, ctx, args, None, grad_req, aux, group2ctx)
