"""A bound symbol's graph compiled into static programs: what ``Module`` and ``Executor`` run.

MXNet's executor runs a bound symbol as a compiled graph; this one does the same with the
program a hybridized Gluon block replays (:mod:`engine.gluon.hybrid.program`: reused
buffers, fused kernels, one tape node for the whole graph). The first forward with given
input shapes, dtypes and training mode evaluates the graph node by node while a tracer
records it (that call's outputs and gradients are the node-by-node ones), and compiles the
record; later forwards with the same signature replay the program. Every bound array (the
arguments, data and labels included, and the auxiliary states, which BatchNorm updates in
place) is an input of the program, passed anew on each call: a new batch, ``forward(data=...)``
and ``copy_params_from`` reach it without a new trace.

A graph that cannot be traced warns once and the executor evaluates it node by node, as it
does when a monitor callback is installed (the monitor needs every operator's output).

>>> import engine as mx
>>> x = mx.sym.var('x')
>>> ex = mx.sym.relu(x * 2).simple_bind(mx.cpu(), x=(2,))
>>> ex.arg_dict['x'][:] = 3
>>> ex.forward()[0].asnumpy().tolist(), ex.forward()[0].asnumpy().tolist()
([6.0, 6.0], [6.0, 6.0])
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any

from .. import autograd
from ..ndarray import NDArray

_MAX_PROGRAMS = 8  # signatures kept per executor (train and predict of a few shapes)


class CompiledGraph:
    """The programs of one bound symbol, by input signature."""

    def __init__(self, symbol: Any) -> None:
        self.symbol = symbol
        # the program's inputs, in order: arguments, then auxiliary states
        self.names = symbol.list_arguments() + symbol.list_auxiliary_states()
        self.programs: dict[tuple[Any, ...], Any] = {}
        self.failure: str | None = None

    def forward(self, values: dict[str, NDArray], is_train: bool,
                record: bool | None = None) -> list[NDArray] | None:
        """The graph's outputs, by the program (traced on a new signature); None where the
        graph runs node by node instead. ``record`` (default: ``is_train``) records the
        run for backward, in the mode ``is_train`` says."""
        if self.failure is not None:
            return None
        arrays = [values.get(name) for name in self.names]
        if any(a is None for a in arrays):
            return None  # the node-by-node evaluation names what is missing
        if len({id(a) for a in arrays}) != len(arrays):
            return None  # one array bound to two names: the imperative graph handles it
        key = (is_train, tuple((a.shape, a.raw.dtype.str, a._ctx.device_type, a._ctx.device_id)
                               for a in arrays))
        program = self.programs.get(key)
        if record is None:
            record = is_train
        with autograd.record(train_mode=is_train) if record else autograd.predict_mode():
            if program is not None:
                return list(program(arrays, arrays[0]._ctx))
            return self._trace(key, values, arrays)

    def _trace(self, key: tuple[Any, ...], values: dict[str, NDArray],
               arrays: list[NDArray]) -> list[NDArray]:
        from ..gluon.hybrid.program import Program
        from ..gluon.hybrid.trace import Tracer, Untraceable, traced_node

        tracer = Tracer(arrays, [])
        try:
            with tracer:
                outputs = self.symbol._evaluate(values, run_node=partial(traced_node, tracer))
        except Exception as err:  # noqa: BLE001 - decided by the node-by-node run below
            # A real error in the graph raises again from there; if that run works, only
            # the trace failed.
            outputs = self.symbol._evaluate(values)
            self._give_up(f"{type(err).__name__} while tracing: {err}")
            return outputs
        try:
            program = Program(tracer, list(outputs), True, arrays[0].xp)
        except Untraceable as err:
            self._give_up(str(err))
            return outputs
        if len(self.programs) >= _MAX_PROGRAMS:
            self.programs.pop(next(iter(self.programs)))
        self.programs[key] = program
        return outputs

    def _give_up(self, reason: str) -> None:
        self.failure = reason
        warnings.warn(f"the symbol graph cannot be compiled ({reason}); it runs node by node",
                      UserWarning, stacklevel=5)
