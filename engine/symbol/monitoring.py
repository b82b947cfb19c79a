"""What an executor's monitor callback sees, as MXNet's graph executor reports it.

With a callback installed (``set_monitor_callback``, ``mx.mon.Monitor``) a bound graph runs
node by node and reports, by name:

- each operator's outputs (``fc_output``) after it runs;
- with ``monitor_all``, before that its inputs: a variable's own name, then the input's
  label, ``<node>_<input>`` (``fc_weight``) or ``<node>_input<i>`` for operators whose
  inputs MXNet leaves unnamed (``Activation``, ``Reshape``, elementwise math);
- after a backward, the gradient each operator sent to each of its inputs, last operator
  first: ``<node>_backward_output<i>`` (``<node>_backward_output`` for one input); an input
  that received no gradient (data, labels) reports zeros.

>>> import engine as mx
>>> x = mx.sym.var('x')
>>> y = mx.sym.FullyConnected(x, num_hidden=2, name='fc')
>>> ex = y.simple_bind(mx.cpu(), x=(1, 3))
>>> seen = []
>>> ex.set_monitor_callback(lambda name, arr: seen.append(name))
>>> _ = ex.forward(is_train=True); ex.backward(mx.nd.ones((1, 2)))
>>> seen
['fc_output', 'fc_backward_output0', 'fc_backward_output1', 'fc_backward_output2']
"""

from __future__ import annotations

from typing import Any

from .. import autograd
from ..ndarray import NDArray
from ..ndarray.ndarray import apply_op

# MXNet operators without input names: the monitor labels their inputs input0, input1, ...
_UNNAMED_INPUTS = frozenset({"Activation", "Flatten", "Reshape", "negative", "Cast",
                             "BlockGrad", "_copy", "_identity_with_attr_like_rhs"})
# generic (engine.nd-served) operators whose MXNet inputs are named
_NAMED_GENERIC = {"softmax": ("data",), "log_softmax": ("data",), "softmin": ("data",),
                  "dot": ("lhs", "rhs"), "batch_dot": ("lhs", "rhs")}


def input_labels(node: Any, count: int) -> list[str]:
    """MXNet's monitor labels of a node's inputs."""
    spec = node.spec
    if type(spec).__name__ == "GenericSpec":
        names = _NAMED_GENERIC.get(node.op)
        if names is None or len(names) != count:
            return [f"{node.name}_input{i}" for i in range(count)]
    elif node.op in _UNNAMED_INPUTS or node.op.endswith("_scalar"):
        return [f"{node.name}_input{i}" for i in range(count)]
    else:
        names = tuple(spec.input_names(node.params(), count)) + tuple(spec.aux)
    return [f"{node.name}_{name}" for name in names[:count]]


class Monitored:
    """An executor's monitor callback, with the ``monitor_all`` flag, and the backward
    gradients of the last recorded forward waiting to be reported."""

    def __init__(self, callback: Any, monitor_all: bool) -> None:
        self.callback = callback
        self.monitor_all = monitor_all
        self._nodes: list[tuple[Any, list[NDArray]]] = []  # (node, inputs) in forward order
        self._grads: dict[tuple[int, int], Any] = {}

    def __call__(self, name: str, array: NDArray) -> None:
        self.callback(name, array)

    def begin(self) -> None:
        """A new forward: forget the last one's nodes."""
        self._nodes, self._grads = [], {}

    def before(self, node: Any, inputs: list[NDArray]) -> list[NDArray]:
        """Report the inputs (``monitor_all``); when recording, return them tapped so their
        gradients are seen."""
        if self.monitor_all:
            for (child, _), label, array in zip(node.inputs, input_labels(node, len(inputs)),
                                                inputs, strict=False):
                if child.op is None:
                    self.callback(child.name, array)
                self.callback(label, array)
        if not autograd.is_recording():
            return inputs
        position = len(self._nodes)
        self._nodes.append((node, inputs))
        return [self._tap(x, position, i) for i, x in enumerate(inputs)]

    def after(self, node: Any, outputs: list[NDArray]) -> None:
        for name, array in zip(node.output_names(), outputs, strict=False):
            self.callback(name, array)

    def _tap(self, x: NDArray, position: int, index: int) -> NDArray:
        def seen(g: Any) -> tuple[Any]:
            key = (position, index)
            self._grads[key] = g if key not in self._grads else self._grads[key] + g
            return (g,)

        return apply_op(x.raw, (x,), seen)

    def after_backward(self) -> None:
        """Report the gradients the last backward sent to each operator's inputs."""
        reached = {position for position, _ in self._grads}
        for position in sorted(reached, reverse=True):
            node, inputs = self._nodes[position]
            prefix = f"{node.name}_backward_output"
            for i, x in enumerate(inputs):
                g = self._grads.get((position, i))
                array = NDArray(g, x.context) if g is not None else NDArray(x.xp.zeros_like(
                    x.raw), x.context)
                self.callback(prefix if len(inputs) == 1 else f"{prefix}{i}", array)
        self._grads = {}
