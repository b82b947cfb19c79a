"""Recording what a hybridized Block computes: the operator sequence behind one forward.

While a :class:`Tracer` is active, every ``HybridBlock`` (the hybridized one and the
children it calls) runs ``hybrid_forward`` with ``F`` = :class:`TraceF` instead of
``engine.nd``. ``TraceF`` forwards each call to the real ``engine.nd`` operator, so the
traced call computes exactly what the imperative one does, and writes down one
:class:`Step` per call: the operator, where each input comes from (a block input, a
Parameter, or an earlier step's output) and the constant arguments.

Arrays seen by the trace are temporarily of class :class:`TracedArray`, so operators and
methods used on them inside ``hybrid_forward`` (``x + y``, ``x.reshape(...)``, ``x.T``) are
recorded too (as MXNet's Symbol supports them). What a static program cannot replay marks
the trace untraceable and the block keeps running imperatively: a value that depends on the
data (``x.asnumpy()``, ``if x.sum() > 0``), an in-place write (``x[:] = 0``, ``x += 1``),
or an array made outside the trace (``nd.ones(...)`` instead of ``F.ones(...)``).

>>> from engine import nd
>>> t = Tracer([nd.ones((2, 2))], [])
>>> with t:
...     out = t.F.relu(t.F.broadcast_mul(t.inputs[0], t.inputs[0]))
>>> [s.name for s in t.steps], t.slot_of(out)
(['broadcast_mul', 'relu'], 2)
"""

from __future__ import annotations

import threading
import weakref
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
        # > 0 while a recorded operator runs: what it does inside is part of that one step
        self.depth = 0

    def __enter__(self) -> Tracer:
        self._previous = current_tracer()
        _active.tracer = self
        return self

    def __exit__(self, *exc: object) -> None:
        _active.tracer = self._previous
        for arr in self._keep:  # traced arrays become plain NDArrays again
            if type(arr) is TracedArray:
                object.__setattr__(arr, "__class__", NDArray)

    # ------------------------------------------------------------------ slots
    def _new_slot(self, arr: NDArray) -> int:
        slot = self.n_slots
        self.n_slots += 1
        self._slot[id(arr)] = slot
        self._keep.append(arr)
        if type(arr) is NDArray:  # NDArray subclasses keep their class (and are not traced)
            object.__setattr__(arr, "__class__", TracedArray)
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

    def call(self, name: str, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run ``fn`` and record it as one step (calls it makes inside are not recorded)."""
        self.depth += 1
        try:
            result = fn(*args, **kwargs)
        finally:
            self.depth -= 1
        if self.depth == 0:
            self.record(name, fn, args, kwargs, result)
        return result

    def record(self, name: str, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
               result: Any) -> None:
        reads: list[int] = []
        arg_t = tuple(self._template(a, reads) for a in args)
        kwarg_t = {k: self._template(v, reads) for k, v in kwargs.items()}
        multi = isinstance(result, (list, tuple))
        outs = list(result) if multi else [result]
        if not all(isinstance(o, NDArray) for o in outs):
            self.fail(f"{name} returned something other than NDArrays")
            return
        if not multi and id(result) in self._slot:
            return  # the operator returned its input unchanged (Dropout at inference...)
        slots = tuple(self._new_slot(o) for o in outs)
        self.steps.append(Step(name, fn, arg_t, kwarg_t, slots, multi, tuple(reads)))


class TraceF:
    """``engine.nd`` (or one of its submodules) whose operator calls are recorded."""

    def __init__(self, module: ModuleType, tracer: Tracer, path: str = "") -> None:
        self._module = module
        # weakly: the tracer holds this object (tracer.F), and a cycle between the two kept
        # every array of the traced call (the whole first forward) alive until the garbage
        # collector came by, on a GPU a gigabyte for ResNet-18 at batch 128
        self._tracer = weakref.ref(tracer)
        self._path = path

    def __getattr__(self, name: str) -> Any:
        tracer = self._tracer()
        if tracer is None:
            raise RuntimeError(f"F.{self._path}{name} was used after hybridize()'s trace of "
                               "the forward ended; use F only inside hybrid_forward")
        target = getattr(self._module, name)
        if isinstance(target, ModuleType):
            return TraceF(target, tracer, f"{self._path}{name}.")
        if not callable(target) or isinstance(target, type):
            return target
        full_name = self._path + name

        def traced(*args: Any, **kwargs: Any) -> Any:
            return tracer.call(full_name, target, args, kwargs)

        traced.__name__ = name
        return traced


# Methods whose result depends on the values (Python control flow on data) or that write in
# place: a static program cannot replay them.
_DATA_DEPENDENT = {"asnumpy", "asscalar", "item", "tolist", "__bool__", "__float__",
                   "__int__", "__index__", "__array__", "__setitem__", "__iadd__", "__isub__",
                   "__imul__", "__itruediv__", "__ipow__", "attach_grad", "backward",
                   "copyto"}
# Attributes read as trace-time constants (the program is specialized to them).
_CONSTANTS = {"shape", "dtype", "ndim", "size", "context", "ctx", "device", "stype", "xp",
              "handle", "grad", "wait_to_read"}


class TracedArray(NDArray):
    """An NDArray during a trace: its operators and methods are recorded as steps."""

    __slots__ = ()

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if name in _CONSTANTS or name.startswith("_") and name not in _DATA_DEPENDENT:
            return value  # private names are the engine's own bookkeeping
        tracer = current_tracer()
        if tracer is None or tracer.depth:
            return value
        if name in _DATA_DEPENDENT:
            tracer.fail(f"NDArray.{name}() inside hybrid_forward depends on the data")
            return value
        if isinstance(value, NDArray):  # a property such as .T
            tracer.record(name, _property_getter(name), (self,), {}, value)
            return value
        if not callable(value):
            return value
        method = getattr(NDArray, name)

        def traced_method(*args: Any, **kwargs: Any) -> Any:
            return tracer.call(f"NDArray.{name}", method, (self, *args), kwargs)

        return traced_method


def _property_getter(name: str) -> Any:
    def get(arr: NDArray) -> Any:
        return getattr(arr, name)

    return get


def _traced_operator(name: str) -> Any:
    plain = getattr(NDArray, name)

    def operator(self: NDArray, *args: Any) -> Any:
        tracer = current_tracer()
        if tracer is None or tracer.depth:
            return plain(self, *args)
        if name in _DATA_DEPENDENT:
            tracer.fail(f"NDArray.{name} inside hybrid_forward depends on the data or "
                        "writes in place")
            return plain(self, *args)
        return tracer.call(f"NDArray.{name}", plain, (self, *args), {})

    operator.__name__ = name
    return operator


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__div__", "__mod__", "__pow__", "__rpow__",
              "__matmul__", "__neg__", "__pos__", "__abs__", "__getitem__", "__eq__",
              "__ne__", "__lt__", "__le__", "__gt__", "__ge__", *sorted(_DATA_DEPENDENT)):
    if _name.startswith("__") and hasattr(NDArray, _name):
        setattr(TracedArray, _name, _traced_operator(_name))
TracedArray.__hash__ = NDArray.__hash__  # type: ignore[method-assign]


def traced_node(tracer: Tracer, node: Any, inputs: list[NDArray]) -> Any:
    """Run one node of a symbol graph (``Symbol._evaluate``'s ``run_node``) as a recorded
    step of ``tracer``, replayed by the program (SymbolBlock and the Module executor)."""
    spec, params = node.spec, node.params()
    call = spec.step(params, len(inputs)) if spec.step is not None else None
    if call is not None:  # recorded as the operator call itself: the program can fuse it
        name, fn, kwargs = call
        return tracer.call(name, fn, tuple(inputs), kwargs)

    def run(*arrays: NDArray) -> Any:
        return spec.forward(params, list(arrays))

    return tracer.call(f"{node.op}:{node.name}", run, tuple(inputs), {})
