"""What a hybridized ``HybridBlock`` runs: one compiled program per input signature.

The first call with given input shapes, dtypes, context and training mode runs the block
imperatively while :class:`Tracer` records it (that call's result, and its gradients, are
the imperative ones), then compiles the record into a :class:`Program`. Later calls with the
same signature replay the program. A new signature traces again (MXNet's CachedOp does the
same when ``static_shape`` is off; with it on MXNet would refuse, Rudder re-traces).

A block whose forward cannot be traced warns once and keeps running imperatively.

>>> import engine as mx
>>> net = mx.gluon.nn.HybridSequential()
>>> net.add(mx.gluon.nn.Dense(4, activation="relu"), mx.gluon.nn.Dense(2))
>>> net.initialize(); net.hybridize(static_alloc=True)
>>> net(mx.nd.ones((3, 5))).shape, net(mx.nd.ones((3, 5))).shape
((3, 2), (3, 2))
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Any

from ... import autograd
from ...ndarray.ndarray import NDArray
from .program import Program
from .trace import Tracer, Untraceable

_MAX_PROGRAMS = 16  # distinct input signatures kept per block


class CachedGraph:
    """The programs of one hybridized block, by input signature."""

    def __init__(self, block: Any, static_alloc: bool) -> None:
        self.block = block
        self.static_alloc = static_alloc
        self.programs: OrderedDict[tuple[Any, ...], Program] = OrderedDict()
        self.fallback_reason: str | None = None
        self.in_format: Any = None  # the arguments' structure at the first call

    def _check_format(self, args: tuple[Any, ...]) -> None:
        """As MXNet's cached graph: the arguments are (nested lists of) arrays or None, in
        the structure of the first call (which arguments are None included)."""
        found = tuple(_format(a, self.block) for a in args)
        if self.in_format is None:
            self.in_format = found
            return
        # trailing None arguments stand for defaults: a call may leave them out, or not
        short, long = sorted((found, self.in_format), key=len)
        if long[:len(short)] != short or any(f != -1 for f in long[len(short):]):
            raise ValueError("The argument structure of HybridBlock does not match the cached "
                             f"version. Stored format = {_shown(self.in_format)}, input format "
                             f"= {_shown(found)}")

    def __call__(self, call_imperatively: Any, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
        if kwargs:
            return call_imperatively(*args, **kwargs)
        if not (len(args) == 1 and type(args[0]) is NDArray and self.in_format == _ONE_ARRAY):
            self._check_format(args)
        if self.fallback_reason is not None:
            return call_imperatively(*args, **kwargs)
        if len(args) == 1 and type(args[0]) is NDArray:
            # the common call, one array: its key without the general walk below
            x = args[0]
            ctx = x._ctx
            described = (tuple(x.raw.shape), x.raw.dtype.str, ctx.device_type, ctx.device_id)
            key = (autograd._state.training, ("tuple", (described,)))
            program = self.programs.get(key)
            if program is not None:
                return program([x], ctx)
        key = _signature(args)
        if key is None:
            return self._give_up("an input that is neither an NDArray nor a constant",
                                 call_imperatively, args)
        inputs = _arrays(args, [])
        if len({id(a) for a in inputs}) != len(inputs):
            # one array passed as several inputs is one input of the program (its gradient
            # then sums in the tape's order); which inputs alias is part of the signature
            first: dict[int, int] = {}
            key = (*key, tuple(first.setdefault(id(a), i) for i, a in enumerate(inputs)))
            inputs = [a for i, a in enumerate(inputs) if first[id(a)] == i]
        program = self.programs.get(key)
        if program is not None:
            return program(inputs, inputs[0]._ctx)
        return self._trace(key, call_imperatively, args, inputs)

    def _trace(self, key: tuple[Any, ...], call_imperatively: Any,
               args: tuple[Any, ...], inputs: list[NDArray]) -> Any:
        tracer = Tracer(inputs, [])
        try:
            with tracer:
                out = call_imperatively(*args)
        except Exception as err:  # noqa: BLE001 - e.g. `if F is nd:` code that needs nd
            # Run it as a plain call: a real error in the forward raises again from there;
            # if that call works, the forward only failed under the trace.
            out = call_imperatively(*args)
            self._warn(f"the forward raised {type(err).__name__}: {err} while being traced")
            return out
        try:
            program = Program(tracer, out, self.static_alloc, inputs[0].xp)
        except Untraceable as err:
            self._warn(str(err))
            return out
        self.programs[key] = program
        if len(self.programs) > _MAX_PROGRAMS:
            self.programs.popitem(last=False)
        return out

    def _give_up(self, reason: str, call_imperatively: Any, args: tuple[Any, ...]) -> Any:
        self._warn(reason)
        return call_imperatively(*args)

    def _warn(self, reason: str) -> None:
        self.fallback_reason = reason
        warnings.warn(
            f"{type(self.block).__name__} '{self.block.name}': hybridize() cannot build a "
            f"static graph ({reason}); the block keeps running imperatively",
            UserWarning, stacklevel=4)


_ONE_ARRAY = (0,)


def _format(arg: Any, block: Any) -> Any:
    """An argument's structure: 0 for an array, -1 for None, a tuple for a list/tuple."""
    if isinstance(arg, NDArray):
        return 0
    if arg is None:
        return -1
    if isinstance(arg, (list, tuple)):
        return tuple(_format(a, block) for a in arg)
    raise ValueError(f"When hybridized, the input of HybridBlock {block.name} must be (nested) "
                     f"list of Symbol or NDArray, but got {arg} of type {type(arg)}")


def _shown(fmt: tuple[Any, ...]) -> Any:
    # MXNet's notation: a flat list of 0 (array) and -1 (None), lists nested
    def show(f: Any) -> Any:
        return [show(x) for x in f] if isinstance(f, tuple) else f

    return [show(f) for f in fmt]


def _signature(args: Any) -> tuple[Any, ...] | None:
    """Shapes, dtypes, contexts (and nesting) of a call's inputs plus the training mode;
    None if an input is neither an array, a nested list/tuple of them, nor a constant."""
    key = _describe(args)
    return None if key is None else (autograd.is_training(), key)


def _describe(arg: Any) -> Any:
    if isinstance(arg, NDArray):
        return (arg.shape, arg.raw.dtype.str, arg._ctx.device_type, arg._ctx.device_id)
    if isinstance(arg, (list, tuple)):
        parts = tuple(_describe(a) for a in arg)
        return None if any(p is None for p in parts) else (type(arg).__name__, parts)
    if arg is None or isinstance(arg, (bool, int, float, str)):
        return ("const", type(arg).__name__, arg)
    return None


def _arrays(arg: Any, found: list[NDArray]) -> list[NDArray]:
    """The NDArrays in ``arg`` (nested lists/tuples), depth first: the program's inputs."""
    if isinstance(arg, NDArray):
        found.append(arg)
    elif isinstance(arg, (list, tuple)):
        for a in arg:
            _arrays(a, found)
    return found
