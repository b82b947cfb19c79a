"""Recording what a hybridized Block computes: the operator sequence behind one forward.

While a :class:`Tracer` is active, every ``HybridBlock`` (the hybridized one and the
children it calls) runs ``hybrid_forward`` with ``F`` = :class:`TraceF` instead of
``engine.nd``. ``TraceF`` forwards each call to the real ``engine.nd`` operator, so the
traced call computes exactly what the imperative one does, and writes down one
:class:`Step` per call: the operator, where each input comes from (a block input, a
Parameter, or an earlier step's output) and the constant arguments.

A value that reaches an operator, or the block's output, without having come through
``F`` (``x + y`` on NDArrays, ``x.reshape(...)``, a fresh ``nd.ones``) is not known to the
trace; the trace is then marked untraceable and the block keeps running imperatively.

>>> from engine import nd
>>> t = Tracer([nd.ones((2, 2))], [])
>>> with t:
...     out = t.F.relu(t.F.broadcast_mul(t.inputs[0], t.inputs[0]))
>>> [s.name for s in t.steps], t.slot_of(out)
(['broadcast_mul', 'relu'], 2)
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from ... import ndarray as nd
from ...ndarray.ndarray import NDArray

_active = threading.local()


def current_tracer() -> Tracer | None:
    """The tracer recording on this thread, if any."""
    return getattr(_active, "tracer", None)


class Untraceable(Exception):
    """The forward used something a static program cannot replay."""


@dataclass(frozen=True)
class SlotRef:
    """An argument that is a traced value: slot number in the program's value table."""

    slot: int


@dataclass
class Step:
    """One recorded operator call: ``outputs = fn(*args, **kwargs)``."""

    name: str
    fn: Any
    args: tuple[Any, ...]          # constants, SlotRef, or lists/tuples of those
    kwargs: dict[str, Any]
    outputs: tuple[int, ...]
    multi_output: bool = False
    inputs: tuple[int, ...] = field(default=())  # every slot read, in argument order


class Tracer:
    """Records the steps of one forward over ``inputs`` (block inputs) and ``params``.

    Slots ``0 .. len(inputs)-1`` are the block's inputs, the next ones the Parameters (in
    the order given); step outputs follow.
    """

    def __init__(self, inputs: list[NDArray], params: list[tuple[Any, NDArray]]) -> None:
        self.inputs = inputs
        self.params = [p for p, _ in params]
        self.steps: list[Step] = []
        self._slot: dict[int, int] = {}
        self._keep: list[NDArray] = []  # holds every traced array so no id() is reused
        self.failure: str | None = None
        self.n_slots = 0
        for arr in inputs:
            self._new_slot(arr)
        for _, arr in params:
            self._new_slot(arr)
        self.F = TraceF(nd, self)
        self._previous: Tracer | None = None

    def __enter__(self) -> Tracer:
        self._previous = current_tracer()
        _active.tracer = self
        return self

    def __exit__(self, *exc: object) -> None:
        _active.tracer = self._previous

    # ------------------------------------------------------------------ slots
    def _new_slot(self, arr: NDArray) -> int:
        slot = self.n_slots
        self.n_slots += 1
        self._slot[id(arr)] = slot
        self._keep.append(arr)
        return slot

    def slot_of(self, arr: NDArray) -> int | None:
        return self._slot.get(id(arr))

    def param_slot(self, param: Any, arr: NDArray) -> NDArray:
        """Register a Parameter a child block fetched (the hybridized block's own and its
        descendants' parameters were registered up front; a shared one may come late)."""
        if id(arr) not in self._slot:
            self.params.append(param)
            self._new_slot(arr)
        return arr

    def fail(self, reason: str) -> None:
        if self.failure is None:
            self.failure = reason

    # ---------------------------------------------------------------- recording
    def _template(self, value: Any, reads: list[int]) -> Any:
        if isinstance(value, NDArray):
            slot = self._slot.get(id(value))
            if slot is None:
                self.fail("an NDArray computed outside F (an operator such as x + y or a "
                          "method such as x.reshape() inside hybrid_forward) reached F")
                return None
            reads.append(slot)
            return SlotRef(slot)
        if isinstance(value, (list, tuple)):
            return type(value)(self._template(v, reads) for v in value)
        if isinstance(value, dict):
            self.fail("a dict argument to an F operator")
        return value

    def record(self, name: str, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
               result: Any) -> None:
        reads: list[int] = []
        arg_t = tuple(self._template(a, reads) for a in args)
        kwarg_t = {k: self._template(v, reads) for k, v in kwargs.items()}
        multi = isinstance(result, (list, tuple))
        outs = list(result) if multi else [result]
        if not all(isinstance(o, NDArray) for o in outs):
            self.fail(f"F.{name} returned something other than NDArrays")
            return
        if not multi and id(result) in self._slot:
            return  # the operator returned its input unchanged (Dropout at inference...)
        slots = tuple(self._new_slot(o) for o in outs)
        self.steps.append(Step(name, fn, arg_t, kwarg_t, slots, multi, tuple(reads)))


class TraceF:
    """``engine.nd`` (or one of its submodules) whose operator calls are recorded."""

    def __init__(self, module: ModuleType, tracer: Tracer, path: str = "") -> None:
        self._module = module
        self._tracer = tracer
        self._path = path

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._module, name)
        if isinstance(target, ModuleType):
            return TraceF(target, self._tracer, f"{self._path}{name}.")
        if not callable(target) or isinstance(target, type):
            return target
        tracer, full_name = self._tracer, self._path + name

        def traced(*args: Any, **kwargs: Any) -> Any:
            result = target(*args, **kwargs)
            tracer.record(full_name, target, args, kwargs, result)
            return result

        traced.__name__ = name
        return traced
