"""Reverse-mode automatic differentiation, as ``mxnet.autograd``.

Operations executed inside ``record()`` on arrays that need a gradient remember their
inputs and a backward rule (see :func:`engine.ndarray.ndarray.apply_op`). ``backward``
walks that graph in reverse topological order with an explicit stack (no recursion
limit on deep graphs), sums gradients that reach an array along several paths, and
writes into each variable's ``.grad`` according to its ``grad_req``.

>>> from engine import nd, autograd
>>> x = nd.array([1.0, 2.0, 3.0]); x.attach_grad()
>>> with autograd.record():
...     y = (x * x).sum()
>>> y.backward(); x.grad.asnumpy().tolist()
[2.0, 4.0, 6.0]
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from . import grad_hooks

if TYPE_CHECKING:
    from .ndarray.ndarray import NDArray

_GRAD_REQS = ("write", "add", "null")


class _State(threading.local):
    recording: bool = False
    training: bool = False
    # id(variable) -> its gradient buffer, for variables a rule may write into directly
    direct: dict[int, Any] | None = None
    # whether the backward now running keeps its graph: a rule that runs a private tape of
    # its own (a hybridized block's program) frees that tape as it goes when this is False
    retain_graph: bool = True


class _Written:
    """Returned by a backward rule for an input whose gradient it already wrote in place."""

    __repr__ = lambda self: "WRITTEN"  # noqa: E731


WRITTEN = _Written()


_state = _State()


def is_recording() -> bool:
    return _state.recording


def is_training() -> bool:
    return _state.training


def set_recording(is_record: bool) -> bool:
    previous, _state.recording = _state.recording, bool(is_record)
    return previous


def set_training(train_mode: bool) -> bool:
    previous, _state.training = _state.training, bool(train_mode)
    return previous


@contextmanager
def _scope(recording: bool | None, training: bool | None) -> Iterator[None]:
    old_rec, old_train = _state.recording, _state.training
    if recording is not None:
        _state.recording = recording
    if training is not None:
        _state.training = training
    try:
        yield
    finally:
        _state.recording, _state.training = old_rec, old_train


def record(train_mode: bool = True) -> Any:
    """Record operations for differentiation; ``train_mode`` also turns on training behaviour
    (dropout, batch statistics)."""
    return _scope(True, train_mode)


def pause(train_mode: bool = False) -> Any:
    """Stop recording inside a ``record()`` block."""
    return _scope(False, train_mode)


def train_mode() -> Any:
    """Training behaviour without changing whether operations are recorded."""
    return _scope(None, True)


def predict_mode() -> Any:
    """Inference behaviour without changing whether operations are recorded."""
    return _scope(None, False)


def mark_variables(
    variables: NDArray | Sequence[NDArray],
    gradients: NDArray | Sequence[NDArray],
    grad_reqs: str | Sequence[str] = "write",
) -> None:
    """Make arrays differentiable variables whose gradients land in ``gradients``."""
    from .ndarray.ndarray import NDArray

    if isinstance(variables, NDArray):
        variables, gradients = [variables], [gradients]  # type: ignore[list-item]
    assert not isinstance(gradients, NDArray)
    if len(variables) != len(gradients):
        raise ValueError(
            f"mark_variables got {len(variables)} variables but {len(gradients)} gradients"
        )
    reqs = [grad_reqs] * len(variables) if isinstance(grad_reqs, str) else list(grad_reqs)
    for var, grad, req in zip(variables, gradients, reqs, strict=True):
        if req not in _GRAD_REQS:
            raise ValueError(f"grad_req must be one of {_GRAD_REQS}, got {req!r}")
        var._set_variable(grad, req)


def _as_list(x: Any) -> list[Any]:
    if x is None:
        return []
    if isinstance(x, (list, tuple)):
        return list(x)
    from .ndarray.ndarray import NDArray

    if isinstance(x, NDArray):
        return [x]
    return list(x)


def depth_first_postorder(roots: list[Any], parents: Callable[[Any], Iterable[Any]]) -> list[Any]:
    """Every node reachable from ``roots``, each after all of its parents (iterative DFS,
    visiting parents in the order ``parents`` gives them). The tape's backward runs this
    order reversed; a hybridized program replays its kernels in the same one, so gradient
    sums happen in the same order and stay bit-identical."""
    order: list[Any] = []
    seen: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False) for root in roots]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for parent in parents(node):
            if id(parent) not in seen:
                stack.append((parent, False))
    return order


def _recorded_inputs(arr: NDArray) -> list[NDArray]:
    return [p for p in arr._node.inputs if p._node is not None]  # type: ignore[union-attr]


def _live_inputs(arr: NDArray) -> list[NDArray]:
    # An input whose own graph an earlier backward freed is a constant here, as in MXNet
    # (``b = b + 1`` after ``backward()`` starts a new graph); only a freed head is an error.
    return [p for p in arr._node.inputs  # type: ignore[union-attr]
            if p._node is not None and p._node.backward is not None]


def _topological_order(heads: list[NDArray], inputs: Any = _recorded_inputs) -> list[NDArray]:
    """Arrays with a recorded node, inputs before outputs."""
    return depth_first_postorder([h for h in heads if h._node is not None], inputs)


def direct_grad_buffer(var: NDArray) -> Any:
    """The raw gradient buffer a backward rule may write ``var``'s gradient into, or None.

    Offered only during ``backward`` (not ``grad``) for a 'write' variable that receives its
    gradient from exactly one place in the graph, so writing in place (``out=``) equals the
    copy that would follow. This saves one full copy of every weight gradient per step.
    """
    direct = _state.direct
    if direct is None:
        return None
    return direct.get(id(var))


def _direct_targets(order: list[NDArray]) -> dict[int, Any]:
    targets: dict[int, Any] = {}
    used_twice: set[int] = set()
    for arr in order:
        for parent in arr._node.inputs:  # type: ignore[union-attr]
            if parent._node is None and parent._grad_req == "write" and parent._grad is not None:
                key = id(parent)
                if key in targets:
                    used_twice.add(key)
                else:
                    grad = parent._grad.raw
                    targets[key] = grad if grad.dtype == parent.raw.dtype else None
    for key in used_twice:
        del targets[key]
    return {key: grad for key, grad in targets.items() if grad is not None}


def _run_backward(
    heads: list[NDArray], head_grads: list[Any], retain_graph: bool, allow_direct: bool = False
) -> dict[int, tuple[NDArray, Any]]:
    """Propagate; returns {id(variable): (variable, summed raw gradient or WRITTEN)}."""
    grads: dict[int, Any] = {}
    for head, hg in zip(heads, head_grads, strict=True):
        if head._node is None and head._grad_req == "null":
            raise ValueError(
                "cannot differentiate an array that was not computed under autograd.record() "
                "from arrays that need a gradient (call attach_grad() on the inputs first)"
            )
        raw = head.xp.ones_like(head.raw) if hg is None else _raw(hg)
        grads[id(head)] = grads[id(head)] + raw if id(head) in grads else raw
    leaves: dict[int, tuple[NDArray, Any]] = {}
    for head in heads:
        if head._node is None:
            leaves[id(head)] = (head, grads[id(head)])
    order = _topological_order(heads, _live_inputs)
    if allow_direct:
        direct = _direct_targets(order)
        for head in heads:  # a head that is itself a variable is written by copy
            direct.pop(id(head), None)
        _state.direct = direct
    schedule = None
    if allow_direct and grad_hooks.active():  # a Trainer reduces gradients as they finish
        schedule = grad_hooks.ReadySchedule(order)
        schedule.start()
    outer_retain, _state.retain_graph = _state.retain_graph, retain_graph
    try:
        _propagate(order, grads, leaves, retain_graph, schedule)
    finally:
        _state.direct = None
        _state.retain_graph = outer_retain
    return leaves


def _propagate(
    order: list[NDArray],
    grads: dict[int, Any],
    leaves: dict[int, tuple[NDArray, Any]],
    retain_graph: bool,
    schedule: grad_hooks.ReadySchedule | None = None,
) -> None:
    for position, arr in enumerate(reversed(order)):
        g = grads.pop(id(arr), None)
        node = arr._node
        assert node is not None
        if node.backward is None:
            raise RuntimeError(
                "the graph was already freed by an earlier backward(); pass "
                "retain_graph=True to the first backward to differentiate it twice"
            )
        if g is None:
            if schedule is not None:
                schedule.finish_node(position, leaves, WRITTEN)
            continue
        input_grads = node.backward(g)
        if not retain_graph:
            node.backward = None
        for parent, pg in zip(node.inputs, input_grads, strict=True):
            if pg is None or (parent._node is None and parent._grad_req == "null"):
                continue
            key = id(parent)
            if parent._node is None:
                if key in leaves:
                    leaves[key] = (parent, leaves[key][1] + pg)
                else:
                    leaves[key] = (parent, pg)
            elif key in grads:
                grads[key] = grads[key] + pg
            else:
                grads[key] = pg
        if schedule is not None:
            schedule.finish_node(position, leaves, WRITTEN)


def _raw(x: Any) -> Any:
    return x.raw if hasattr(x, "_data") else x


def backward(
    heads: NDArray | Sequence[NDArray],
    head_grads: NDArray | Sequence[NDArray | None] | None = None,
    retain_graph: bool = False,
    train_mode: bool = True,
) -> None:
    """Compute the gradients of ``heads`` and store them in the variables' ``.grad``."""
    head_list = _as_list(heads)
    hg = [None] * len(head_list) if head_grads is None else _as_list(head_grads)
    if len(hg) != len(head_list):
        raise ValueError(f"got {len(head_list)} heads but {len(hg)} head_grads")
    # _scope(False, train_mode) inlined: this runs once per training step
    state = _state
    old_rec, old_train = state.recording, state.training
    state.recording, state.training = False, train_mode
    try:
        leaves = _run_backward(head_list, hg, retain_graph, allow_direct=True)
    finally:
        state.recording, state.training = old_rec, old_train
    listening = grad_hooks.active()
    for var, g in leaves.values():
        if g is WRITTEN:
            var._fresh_grad = True
        else:
            var._accumulate_grad(g)
        if listening:
            grad_hooks.announce(var)
    if listening:
        grad_hooks.ReadySchedule.end()


def grad(
    heads: NDArray | Sequence[NDArray],
    variables: NDArray | Sequence[NDArray],
    head_grads: NDArray | Sequence[NDArray | None] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    train_mode: bool = True,
) -> list[NDArray]:
    """Gradients of ``heads`` with respect to ``variables``, returned rather than stored.

    With ``create_graph=True`` the gradient computation is itself recorded, so the returned
    gradients can be differentiated again (second order); see
    :mod:`engine.ndarray.higher_order` for the operations that support it.
    """
    from .ndarray.ndarray import NDArray

    head_list = _as_list(heads)
    var_list = _as_list(variables)
    hg = [None] * len(head_list) if head_grads is None else _as_list(head_grads)
    if create_graph:
        return _grad_recorded(head_list, var_list, hg, train_mode)
    with _scope(False, train_mode):
        leaves = _run_backward(head_list, hg, bool(retain_graph))
    out = []
    for var in var_list:
        got = leaves.get(id(var))
        data = var.xp.zeros_like(var.raw) if got is None else got[1]
        out.append(NDArray(data, var.context))
    return out


def get_symbol(x: NDArray) -> Any:  # pragma: no cover - MXNet API kept for discoverability
    raise NotImplementedError(
        "Rudder records imperative graphs only; see engine.symbol for symbols"
    )


def _grad_recorded(heads: list[NDArray], variables: list[NDArray], head_grads: list[Any],
                   train_mode: bool) -> list[NDArray]:
    """``grad`` whose own operations are recorded (``create_graph=True``)."""
    from .ndarray.higher_order import recorded_backward
    from .ndarray.ndarray import NDArray

    grads: dict[int, NDArray] = {}
    leaves: dict[int, NDArray] = {}
    for head, hg in zip(heads, head_grads, strict=True):
        g = NDArray(head.xp.ones_like(head.raw), head.context) if hg is None else hg
        target = leaves if head._node is None else grads
        target[id(head)] = target[id(head)] + g if id(head) in target else g
    with _scope(True, train_mode):
        for arr in reversed(_topological_order(heads)):
            g = grads.pop(id(arr), None)
            if g is None:
                continue
            node = arr._node
            assert node is not None
            for parent, pg in zip(node.inputs, recorded_backward(node, g, arr), strict=True):
                if pg is None or (parent._node is None and parent._grad_req == "null"):
                    continue
                target = leaves if parent._node is None else grads
                key = id(parent)
                target[key] = target[key] + pg if key in target else pg
    zeros = [NDArray(v.xp.zeros_like(v.raw), v.context) for v in variables]
    return [leaves.get(id(v), zero) for v, zero in zip(variables, zeros, strict=True)]


class Function:
    """A differentiable operation with a hand-written gradient (``mxnet.autograd.Function``).

    Subclass it and define ``forward(*inputs)`` and ``backward(*output_grads)`` on NDArrays;
    ``save_for_backward`` keeps what ``backward`` needs. The forward is not recorded: its
    outputs get ``backward`` as their gradient rule. Each instance is called once.

    >>> from engine import nd, autograd
    >>> class Square(autograd.Function):
    ...     def forward(self, x):
    ...         self.save_for_backward(x)
    ...         return x * x
    ...     def backward(self, dy):
    ...         x, = self.saved_tensors
    ...         return 2 * x * dy
    >>> x = nd.array([3.0]); x.attach_grad()
    >>> with autograd.record():
    ...     y = Square()(x)
    >>> y.backward(); x.grad.asnumpy().tolist()
    [6.0]
    """

    def __init__(self) -> None:
        self._used = False
        self.saved_tensors: tuple[Any, ...] = ()
        self._inputs: tuple[NDArray, ...] = ()
        self._outputs: tuple[NDArray, ...] = ()

    def save_for_backward(self, *args: Any) -> None:
        self.saved_tensors = args

    def forward(self, *inputs: Any) -> Any:
        raise NotImplementedError

    def backward(self, *output_grads: Any) -> Any:
        raise NotImplementedError

    def __call__(self, *inputs: NDArray) -> Any:
        from .ndarray.ndarray import NDArray, _Node

        assert not self._used, \
            "Each Function instance can only be called once. Please create another instance."
        self._used = True
        with _scope(False, None):
            outputs = self.forward(*inputs)
        single = isinstance(outputs, NDArray)
        out_list = (outputs,) if single else tuple(outputs)
        # fresh arrays: the outputs may alias inputs, which must keep their own history
        out_list = tuple(NDArray(o.raw, o.context) for o in out_list)
        self._inputs, self._outputs = tuple(inputs), out_list
        if _state.recording and any(
                x._node is not None or x._grad_req != "null" for x in inputs):
            for index, out in enumerate(out_list):
                out._node = _Node(self._inputs, self._raw_rule(index))
                out._node.op = ("function", self, index)
        return out_list[0] if single else out_list

    def _output_grads(self, g: Any, index: int) -> list[Any]:
        from .ndarray.ndarray import NDArray

        grads = []
        for i, out in enumerate(self._outputs):
            grads.append(g if i == index else NDArray(out.xp.zeros_like(out.raw), out.context))
        return grads

    def _raw_rule(self, index: int) -> Any:
        """The first-order rule: the user's backward on NDArrays, unrecorded."""
        from .ndarray.ndarray import NDArray

        def rule(g: Any) -> list[Any]:
            out = self._outputs[index]
            with _scope(False, None):
                grads = self.backward(*self._output_grads(NDArray(g, out.context), index))
            return [None if x is None else _raw(x) for x in _as_list(grads)]

        return rule

    def _recorded_backward(self, g: NDArray, index: int) -> list[Any]:
        """The user's backward, recorded (for ``grad(create_graph=True)``)."""
        return _as_list(self.backward(*self._output_grads(g, index)))


def __getattr__(name: str) -> Any:
    # mxnet.autograd re-exports NDArray; imported lazily (the ndarray package imports us)
    if name == "NDArray":
        from .ndarray.ndarray import NDArray

        return NDArray
    raise AttributeError(f"module 'engine.autograd' has no attribute {name!r}")
