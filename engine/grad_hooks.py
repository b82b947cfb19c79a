"""Gradient-ready notifications: who may act on a variable's gradient before backward ends.

A distributed Trainer reduces gradients while backward still computes the rest (as
PyTorch's DDP does): it registers a listener here, and ``autograd.backward`` tells it
(1) which variables the backward about to run will write, then (2) each variable as soon
as its ``.grad`` holds its final value, in the order backward finishes them. A variable
is final once every recorded operation that read it has run its backward rule; a
hybridized block's compiled program reports its parameters from inside its own backward,
kernel by kernel, so the early layers' reductions start while later kernels still run.

Nothing here costs anything while no listener is registered. ``autograd.grad`` (which
writes no ``.grad``) never notifies.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .ndarray.ndarray import NDArray


class GradListener(Protocol):
    def backward_started(self, variables: dict[int, NDArray]) -> None:
        """Backward is about to write the gradients of ``variables`` (by id)."""

    def grad_ready(self, variable: NDArray) -> None:
        """``variable.grad`` now holds its final gradient of the running backward."""


# weak: a listener lives as long as the Trainer that owns it
_listeners: weakref.WeakSet[Any] = weakref.WeakSet()


class _Announced(threading.local):
    # ids of the variables announced during the backward now running on this thread
    ids: set[int] | None = None


_announced = _Announced()


def add_listener(listener: GradListener) -> None:
    """Start notifying ``listener`` (a Trainer's gradient reducer)."""
    _listeners.add(listener)


def remove_listener(listener: GradListener) -> None:
    _listeners.discard(listener)


def active() -> bool:
    """Whether any listener is registered (the fast path skips all of this when not)."""
    return bool(_listeners)


def announce(variable: NDArray) -> None:
    """Tell the listeners ``variable``'s gradient is final (once per backward)."""
    ids = _announced.ids
    if ids is not None:
        if id(variable) in ids:
            return
        ids.add(id(variable))
    for listener in list(_listeners):
        listener.grad_ready(variable)


class ReadySchedule:
    """For one backward over ``order`` (arrays with a recorded node, inputs first): after
    which node (counted in backward order) each variable's gradient is complete."""

    def __init__(self, order: list[NDArray]) -> None:
        last: dict[int, tuple[int, NDArray]] = {}
        for position, arr in enumerate(reversed(order)):
            for parent in arr._node.inputs:  # type: ignore[union-attr]
                if parent._node is None and parent._grad_req != "null" and \
                        parent._grad is not None:
                    last[id(parent)] = (position, parent)
        self.variables = {key: var for key, (_, var) in last.items()}
        self.after: dict[int, list[NDArray]] = {}
        for position, var in last.values():
            self.after.setdefault(position, []).append(var)

    def start(self) -> None:
        _announced.ids = set()
        for listener in list(_listeners):
            listener.backward_started(self.variables)

    def finish_node(self, position: int, leaves: dict[int, tuple[NDArray, Any]],
                    written: Any) -> None:
        """Write and announce the variables complete after node ``position``."""
        for var in self.after.get(position, ()):
            got = leaves.pop(id(var), None)
            if got is None:
                continue  # no gradient reached it in this backward
            if got[1] is written:
                var._fresh_grad = True
            else:
                var._accumulate_grad(got[1])
            announce(var)

    @staticmethod
    def end() -> None:
        _announced.ids = None
