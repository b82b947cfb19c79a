"""``Executor``: a symbol bound to arrays (``Symbol.bind``/``simple_bind``).

``forward`` runs the graph as a compiled program (:mod:`.compiled_graph`: traced on the
first call of each input signature, then replayed with reused buffers and fused kernels),
under ``autograd.record()`` when ``is_train``; with a monitor callback installed, or for a
graph that cannot be traced, it evaluates the graph node by node with NDArray ops.
``backward`` runs autograd into the bound gradient arrays.

>>> import engine as mx
>>> x = mx.sym.var('x')
>>> ex = (x * 2).simple_bind(mx.cpu(), x=(2,))
>>> ex.arg_dict['x'][:] = 3
>>> ex.forward()[0].asnumpy().tolist()
[6.0, 6.0]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy

from .. import autograd
from ..ndarray import NDArray, zeros
from .compiled_graph import CompiledGraph


def _as_dict(names: list[str], arrays: Any, what: str) -> dict[str, NDArray]:
    if arrays is None:
        return {}
    if isinstance(arrays, Mapping):
        return dict(arrays)
    arrays = list(arrays)
    if len(arrays) != len(names):
        raise ValueError(f"{what}: expected {len(names)} arrays ({names}), got {len(arrays)}")
    return dict(zip(names, arrays, strict=True))


def _grad_reqs(names: list[str], grad_req: Any) -> dict[str, str]:
    if isinstance(grad_req, str):
        return {n: grad_req for n in names}
    if isinstance(grad_req, Mapping):
        return {n: grad_req.get(n, "null") for n in names}
    return dict(zip(names, grad_req, strict=True))


class Executor:
    """Arrays bound to a symbol's inputs, with ``forward``/``backward`` over them."""

    def __init__(self, symbol: Any, ctx: Any, args: Any, args_grad: Any, grad_req: Any,
                 aux_states: Any) -> None:
        self._symbol = symbol
        self._ctx = ctx
        arg_names = symbol.list_arguments()
        self.arg_dict = _as_dict(arg_names, args, "args")
        missing = [n for n in arg_names if n not in self.arg_dict]
        if missing:
            raise ValueError(f"bind: no arrays for arguments {missing}")
        self.aux_dict = _as_dict(symbol.list_auxiliary_states(), aux_states, "aux_states")
        reqs = _grad_reqs(arg_names, grad_req)
        self.grad_dict = _as_dict(arg_names, args_grad, "args_grad") if args_grad is not None \
            else {}
        self._grad_req = reqs
        for name in arg_names:
            if reqs.get(name, "null") != "null" and (args_grad is None or name in
                                                      self.grad_dict):
                array = self.arg_dict[name]
                array.attach_grad(reqs[name])
                if name in self.grad_dict:
                    array._grad = self.grad_dict[name]  # backward writes the caller's array
                self.grad_dict[name] = array.grad
        self.outputs: list[NDArray] = []
        self._monitor: Any = None
        self._compiled = CompiledGraph(symbol)

    def set_monitor_callback(self, callback: Any, monitor_all: bool = False) -> None:
        """Call ``callback(name, array)`` with every operator output of each forward."""
        self._monitor = _Callback(callback, monitor_all)

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
        """Compute the outputs; ``kwargs`` first overwrite bound arguments by name."""
        for name, value in kwargs.items():
            if name not in self.arg_dict:
                raise ValueError(f"forward: {name!r} is not an argument of the symbol")
            self.arg_dict[name][:] = value
        values = {**self.arg_dict, **self.aux_dict}
        if self._monitor is None:
            outputs = self._compiled.forward(values, bool(is_train))
            if outputs is not None:
                self.outputs = outputs
                return outputs
        if is_train:
            with autograd.record(train_mode=True):
                self.outputs = self._symbol._evaluate(values, self._monitor)
        else:
            with autograd.predict_mode():
                self.outputs = self._symbol._evaluate(values, self._monitor)
        # the bound gradient arrays are refreshed by backward; keep the dict pointing at them
        return self.outputs

    def backward(self, out_grads: Any = None, is_train: bool = True) -> None:
        """Gradients of the outputs into the bound gradient arrays."""
        if not self.outputs or all(o._node is None for o in self.outputs):
            raise RuntimeError("backward needs a forward(is_train=True) first")
        if out_grads is None:
            autograd.backward(self.outputs)
        else:
            grads = [out_grads] if isinstance(out_grads, NDArray) else list(out_grads)
            autograd.backward(self.outputs, grads)
        for name in self.grad_dict:
            if self.arg_dict[name].grad is not None:
                self.grad_dict[name] = self.arg_dict[name].grad

    def copy_params_from(self, arg_params: Mapping[str, NDArray],
                         aux_params: Mapping[str, NDArray] | None = None,
                         allow_extra_params: bool = False) -> None:
        for table, source in ((self.arg_dict, arg_params), (self.aux_dict, aux_params or {})):
            for name, value in source.items():
                if name in table:
                    table[name][:] = value
                elif not allow_extra_params:
                    raise ValueError(f"Find name {name} that is not in the arguments")


class _Callback:
    """A monitor callback with the ``monitor_all`` flag the graph evaluation reads."""

    def __init__(self, callback: Any, monitor_all: bool) -> None:
        self.callback = callback
        self.monitor_all = monitor_all

    def __call__(self, name: str, array: NDArray) -> None:
        self.callback(name, array)


def simple_bind(symbol: Any, ctx: Any, grad_req: Any, type_dict: Any,
                shapes: dict[str, Sequence[int]]) -> Executor:
    """Zero arrays of the inferred shapes (dtypes from ``type_dict``), then bind."""
    arg_shapes, _, aux_shapes = symbol.infer_shape(**shapes)
    if arg_shapes is None:
        raise ValueError(f"simple_bind: shapes {shapes} do not determine every argument")
    arg_types = symbol.infer_type(**(type_dict or {}))[0] or \
        [numpy.float32] * len(symbol.list_arguments())
    types = dict(zip(symbol.list_arguments(), arg_types, strict=True))
    args = {n: zeros(s, dtype=types[n]) for n, s in zip(symbol.list_arguments(), arg_shapes,
                                                        strict=True)}
    aux = {n: zeros(s) for n, s in zip(symbol.list_auxiliary_states(), aux_shapes, strict=True)}
    return Executor(symbol, ctx, args, None, grad_req, aux)
