"""A layer's weight preparation, queued ahead of the layer.

Before a convolution can multiply, it rearranges its weight: Winograd layers transform every
filter (``U = G w Gᵀ``, and F(4x4)'s forward also ``Uᵀ``), a convolution of 1-pixel maps
copies out its one kernel position, an im2col layer copies a (F, C, KH, KW) weight into the
rows its columns meet. That work reads the weight alone, and a hybridized
forward knows its weights before its first layer runs: the program queues the preparations
its previous call made (:func:`ahead`), in layer order, on the engine's other threads, and
each layer takes its result when it gets there (:func:`prepared`), running it itself when
no thread has started it yet.

The results go into buffers the program keeps from call to call (its static_alloc buffer
set), allocated by the calling thread: a large array allocated on a pool thread comes from
glibc's per-thread arena, which hands its memory back after each step and faults it in
again on the next (on ResNet-18 that made each 512-channel transform 10x slower).

The floats are the same: the same function on the same weight, whichever thread runs it
(and a weight does not change during a forward). Without spare threads, outside a program,
or with ``RUDDER_ENGINE_DEFER=off``, :func:`prepared` computes in place, as before.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from . import kernel_threads

# make(weight, out): the preparation of ``weight`` (a function of it alone, and constants),
# written into ``out`` when that is an array, else into a new one; returns the result
Make = Callable[[Any, Any], Any]


@dataclass(frozen=True)
class Made:
    """A preparation a layer asked for: what (``kind``), how, the shape and dtype of the
    result, and those of the weight it was made of (never the weight itself: a recipe is
    kept for the next call)."""

    kind: str
    make: Make
    shape: tuple[int, ...]
    dtype: Any
    weight_shape: tuple[int, ...]
    weight_dtype: Any

    def fits(self, weight: Any) -> bool:
        """Whether this recipe applies to ``weight`` (shaped as the one it was made of)."""
        return bool(weight.shape == self.weight_shape and weight.dtype == self.weight_dtype)


class Forward:
    """One forward's queued preparations (with the buffers they fill) and the ones its
    layers asked for (``made``: what the next call queues)."""

    def __init__(self) -> None:
        self.tickets: dict[tuple[str, int], kernel_threads.Ticket] = {}
        self.buffers: dict[tuple[str, int], Any] = {}
        self.made: list[tuple[Any, Made]] = []  # (the weight, its recipe)
        self.results: dict[tuple[str, int], Any] = {}  # what the layers were given
        self.taken = 0  # preparations a layer found queued (for tests and profiles)


_local = threading.local()


@contextlib.contextmanager
def ahead(queue: Iterable[tuple[Made, Any, Any]]) -> Iterator[Forward]:
    """A forward in which each ``(made, weight, out)`` of ``queue`` (a recipe of an earlier
    call, this call's array of that weight, the buffer the result goes into) is queued for
    the other threads at once, inside a :func:`.kernel_threads.deferring` block, which
    waits for them at its end. With no spare thread, the layers still fill the buffers."""
    forward = Forward()
    spare = True
    for made, weight, out in queue:
        key = (made.kind, id(weight))
        forward.buffers[key] = out
        ticket = kernel_threads.submit(partial(made.make, weight, out)) if spare else None
        if ticket is None:
            spare = False
        else:
            forward.tickets[key] = ticket
    outer = getattr(_local, "forward", None)
    _local.forward = forward
    try:
        yield forward
    finally:
        _local.forward = outer


def prepared(kind: str, weight: Any, make: Make) -> Any:
    """``make(weight, out)``, from the queue when :func:`ahead` queued it. The result is
    shared by whoever asks for the same ``kind`` of the same weight in this forward, so
    nobody may write into it."""
    forward: Forward | None = getattr(_local, "forward", None)
    if forward is None:
        return make(weight, None)
    key = (kind, id(weight))
    result = forward.results.get(key)
    if result is not None:  # a weight read by two layers the same way: prepared once
        return result
    ticket = forward.tickets.get(key)
    if ticket is not None:
        forward.taken += 1
        result = ticket.result()
    else:
        result = make(weight, forward.buffers.get(key))
    forward.results[key] = result
    forward.made.append((weight, Made(kind, make, tuple(result.shape), result.dtype,
                                      tuple(weight.shape), weight.dtype)))
    return result


__all__ = ["Forward", "Made", "Make", "ahead", "prepared"]
