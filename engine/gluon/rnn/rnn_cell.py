"""Recurrent cells (``mxnet.gluon.rnn``): one time step per call, or ``unroll`` over a
sequence. Parameter names, shapes and gate orders are MXNet 1.9.1's: ``i2h_weight`` is
(gates·hidden, input), LSTM gates are (input, forget, cell, output), GRU gates are
(reset, update, new) with the reset gate applied to ``h2h`` (cuDNN's form).

>>> import engine as mx
>>> cell = mx.gluon.rnn.LSTMCell(4, input_size=3); cell.initialize()
>>> out, states = cell.unroll(5, mx.nd.ones((2, 5, 3)), merge_outputs=True)
>>> out.shape, [s.shape for s in states]
((2, 5, 4), [(2, 4), (2, 4)])
"""

from __future__ import annotations

from typing import Any

from ... import ndarray as nd
from ...ndarray.ndarray import NDArray
from ..block import Block, HybridBlock
from .sequence import last_valid, mask_invalid, ops_for, split_steps, symbolic


def _activate(F: Any, x: Any, activation: Any, **name: Any) -> Any:  # noqa: N803
    if isinstance(activation, str):
        named = {"tanh": F.tanh, "relu": F.relu, "sigmoid": F.sigmoid,
                 "softsign": F.softsign}.get(activation)
        return named(x, **name) if named else F.Activation(x, act_type=activation, **name)
    if name and type(activation).__name__ == "LeakyReLU":  # MXNet names this one on graphs
        return F.LeakyReLU(x, act_type="leaky", slope=activation._alpha, **name)
    return activation(x)  # a Block such as nn.LeakyReLU, or any callable


class _Names:
    """MXNet's operator names for one step of a cell on Symbols (``t0_i2h``, ``t0_out``):
    ``names("out")`` is ``{"name": "t0_out"}`` there and nothing on NDArrays."""

    def __init__(self, F: Any, counter: int) -> None:  # noqa: N803
        self.graph = getattr(F, "__name__", "") == "engine.symbol"
        self.prefix = f"t{counter}_"

    def __call__(self, suffix: str) -> dict[str, str]:
        return {"name": self.prefix + suffix} if self.graph else {}


def _add(F: Any, a: Any, b: Any, name: dict[str, str]) -> Any:  # noqa: N803
    return F.elemwise_add(a, b, **name) if name else a + b


def _mul(F: Any, a: Any, b: Any, name: dict[str, str]) -> Any:  # noqa: N803
    return F.elemwise_mul(a, b, **name) if name else a * b


class _NoContext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _context_of(inputs: Any) -> Any:
    """The context to make begin states in (none for Symbols)."""
    if symbolic(inputs):
        return _NoContext()
    return inputs.context if isinstance(inputs, NDArray) else inputs[0].context


def begin_state_func(inputs: Any) -> Any:
    """What makes begin states for ``inputs``: ``nd.zeros``, or ``symbol.zeros`` with an
    unknown batch size that the graph's shape inference fills in."""
    return ops_for(inputs).zeros


class RecurrentCell(Block):
    """Base class of recurrent cells: ``cell(x, states) -> (output, new_states)``."""

    def __init__(self, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix=prefix, params=params)
        self._modified = False
        self.reset()

    def reset(self) -> None:
        """Reset the step counters before reusing the cell for another sequence."""
        self._init_counter = -1
        self._counter = -1
        for cell in self._children.values():
            if isinstance(cell, RecurrentCell):
                cell.reset()

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        """Shape and layout of each state for a batch of ``batch_size``."""
        raise NotImplementedError()

    def begin_state(self, batch_size: int = 0, func: Any = nd.zeros, **kwargs: Any) -> list[Any]:
        """Initial states made by ``func`` (``nd.zeros`` by default) with each state's shape."""
        if self._modified:
            raise AssertionError("After applying modifier cells (e.g. ZoneoutCell) the base "
                                 "cell cannot be called directly. Call the modifier cell "
                                 "instead.")
        states = []
        for info in self.state_info(batch_size):
            self._init_counter += 1
            info = dict(info or {}, **kwargs)
            states.append(func(name=f"{self.prefix}begin_state_{self._init_counter}", **info))
        return states

    def unroll(self, length: int, inputs: Any, begin_state: Any = None, layout: str = "NTC",
               merge_outputs: bool | None = None, valid_length: Any = None) -> tuple[Any, Any]:
        """Run the cell over ``length`` steps of ``inputs`` (one array in ``layout`` or a list
        of per-step arrays). Returns (outputs, final states); with ``valid_length`` the
        padded outputs are zeros and each state is the one at the sample's last valid step."""
        self.reset()
        steps, axis, batch_size = split_steps(length, inputs, layout, False)
        if begin_state is None:
            with _context_of(steps):
                begin_state = self.begin_state(batch_size=batch_size,
                                               func=begin_state_func(steps))
        states = begin_state
        outputs, all_states = [], []
        for i in range(length):
            output, states = self(steps[i], states)
            outputs.append(output)
            if valid_length is not None:
                all_states.append(states)
        if valid_length is not None:
            if symbolic(steps):
                raise NotImplementedError("unroll with valid_length on Symbols is not "
                                          "supported; unroll NDArrays")
            states = [last_valid(nd.stack(*step_states), valid_length)
                      for step_states in zip(*all_states, strict=True)]
            outputs = mask_invalid(nd.stack(*outputs, axis=axis), valid_length, axis)
        outputs, _, _ = split_steps(length, outputs, layout, merge_outputs)
        return outputs, states

    def forward(self, inputs: Any, states: Any) -> Any:
        self._counter += 1
        return super().forward(inputs, states)


class HybridRecurrentCell(RecurrentCell, HybridBlock):
    """A recurrent cell written with ``hybrid_forward(F, x, states, **params)``."""

    def hybrid_forward(self, F: Any, x: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N803
        raise NotImplementedError


class _GatedCell(HybridRecurrentCell):
    """Shared parts of RNN/LSTM/GRU cells: the i2h/h2h parameters and their inference."""

    _gates = 1
    _num_states = 1

    def __init__(self, hidden_size: int, i2h_weight_initializer: Any = None,
                 h2h_weight_initializer: Any = None, i2h_bias_initializer: Any = "zeros",
                 h2h_bias_initializer: Any = "zeros", input_size: int = 0,
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix=prefix, params=params)
        self._hidden_size = hidden_size
        self._input_size = input_size
        rows = self._gates * hidden_size
        get = self.params.get
        self.i2h_weight = get("i2h_weight", shape=(rows, input_size),
                              init=i2h_weight_initializer, allow_deferred_init=True)
        self.h2h_weight = get("h2h_weight", shape=(rows, hidden_size),
                              init=h2h_weight_initializer, allow_deferred_init=True)
        self.i2h_bias = get("i2h_bias", shape=(rows,), init=i2h_bias_initializer,
                            allow_deferred_init=True)
        self.h2h_bias = get("h2h_bias", shape=(rows,), init=h2h_bias_initializer,
                            allow_deferred_init=True)

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        return [{"shape": (batch_size, self._hidden_size), "__layout__": "NC"}
                for _ in range(self._num_states)]

    def infer_shape(self, x: Any, *args: Any) -> None:
        self.i2h_weight.shape = (self._gates * self._hidden_size, x.shape[-1])

    def _projections(self, F: Any, x: Any, h: Any, i2h_weight: Any, h2h_weight: Any,  # noqa: N803
                     i2h_bias: Any, h2h_bias: Any) -> tuple[Any, Any]:
        rows = self._gates * self._hidden_size
        names = _Names(F, self._counter)
        i2h = F.FullyConnected(x, i2h_weight, i2h_bias, num_hidden=rows, **names("i2h"))
        h2h = F.FullyConnected(h, h2h_weight, h2h_bias, num_hidden=rows, **names("h2h"))
        return i2h, h2h

    def __repr__(self) -> str:
        shape = self.i2h_weight.shape
        mapping = f"{shape[1] if shape[1] else None} -> {shape[0]}"
        extra = getattr(self, "_repr_extra", "")
        return f"{type(self).__name__}({mapping}{extra})"


# The steps below compute the same on NDArrays and Symbols; on Symbols each operator gets
# the name MXNet gives it (``names``), so graphs list MXNet's outputs (``rnn_t0_out_output``)
def rnn_step(F: Any, i2h: Any, h2h: Any, states: list[Any], activation: Any,  # noqa: N803
             names: _Names) -> Any:
    out = _activate(F, _add(F, i2h, h2h, names("plus0")), activation, **names("out"))
    return out, [out]


def lstm_step(F: Any, i2h: Any, h2h: Any, states: list[Any], activation: Any,  # noqa: N803
              recurrent_activation: Any, names: _Names) -> Any:
    gates = _add(F, i2h, h2h, names("plus0"))
    if names.graph:
        in_gate, forget_gate, in_transform, out_gate = F.SliceChannel(
            gates, num_outputs=4, **names("slice"))
    else:
        in_gate, forget_gate, in_transform, out_gate = F.split(gates, num_outputs=4, axis=1)
    in_gate = _activate(F, in_gate, recurrent_activation, **names("i"))
    forget_gate = _activate(F, forget_gate, recurrent_activation, **names("f"))
    in_transform = _activate(F, in_transform, activation, **names("c"))
    out_gate = _activate(F, out_gate, recurrent_activation, **names("o"))
    next_c = _add(F, _mul(F, forget_gate, states[1], names("mul0")),
                  _mul(F, in_gate, in_transform, names("mul1")), names("state"))
    squashed = F.Activation(next_c, act_type=activation, **names("activation0")) \
        if names.graph and isinstance(activation, str) else _activate(F, next_c, activation)
    next_h = _mul(F, out_gate, squashed, names("out"))
    return next_h, [next_h, next_c]


def gru_step(F: Any, i2h: Any, h2h: Any, states: list[Any], activation: Any,  # noqa: N803
             recurrent_activation: Any, names: _Names) -> Any:
    if names.graph:
        i2h_r, i2h_z, i2h_n = F.SliceChannel(i2h, num_outputs=3, **names("i2h_slice"))
        h2h_r, h2h_z, h2h_n = F.SliceChannel(h2h, num_outputs=3, **names("h2h_slice"))
    else:
        i2h_r, i2h_z, i2h_n = F.split(i2h, num_outputs=3, axis=1)
        h2h_r, h2h_z, h2h_n = F.split(h2h, num_outputs=3, axis=1)
    reset_gate = _activate(F, _add(F, i2h_r, h2h_r, names("plus0")), recurrent_activation,
                           **names("r_act"))
    update_gate = _activate(F, _add(F, i2h_z, h2h_z, names("plus1")), recurrent_activation,
                            **names("z_act"))
    candidate = _activate(F, _add(F, i2h_n, _mul(F, reset_gate, h2h_n, names("mul0")),
                                  names("plus2")), activation, **names("h_act"))
    if names.graph:
        keep = F.elemwise_sub(F.ones_like(update_gate, **names("ones_like0")), update_gate,
                              **names("minus0"))
    else:
        keep = 1 - update_gate
    next_h = _add(F, _mul(F, keep, candidate, names("mul1")),
                  _mul(F, update_gate, states[0], names("mul20")), names("out"))
    return next_h, [next_h]


class RNNCell(_GatedCell):
    """Elman cell: ``h' = activation(W_i x + b_i + W_h h + b_h)``."""

    def __init__(self, hidden_size: int, activation: Any = "tanh",
                 i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros",
                 h2h_bias_initializer: Any = "zeros", input_size: int = 0,
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(hidden_size, i2h_weight_initializer, h2h_weight_initializer,
                         i2h_bias_initializer, h2h_bias_initializer, input_size, prefix, params)
        self._activation = activation
        self._repr_extra = f", {activation}"

    def _alias(self) -> str:
        return "rnn"

    def hybrid_forward(self, F: Any, x: Any, states: Any, i2h_weight: Any, h2h_weight: Any,  # noqa: N803
                       i2h_bias: Any, h2h_bias: Any) -> Any:
        i2h, h2h = self._projections(F, x, states[0], i2h_weight, h2h_weight, i2h_bias, h2h_bias)
        return rnn_step(F, i2h, h2h, states, self._activation, _Names(F, self._counter))


class _RecurrentGatedCell(_GatedCell):
    """A gated cell with MXNet's (activation, recurrent_activation) pair: LSTM and GRU."""

    def __init__(self, hidden_size: int, i2h_weight_initializer: Any = None,
                 h2h_weight_initializer: Any = None, i2h_bias_initializer: Any = "zeros",
                 h2h_bias_initializer: Any = "zeros", input_size: int = 0,
                 prefix: str | None = None, params: Any = None, activation: Any = "tanh",
                 recurrent_activation: Any = "sigmoid") -> None:
        super().__init__(hidden_size, i2h_weight_initializer, h2h_weight_initializer,
                         i2h_bias_initializer, h2h_bias_initializer, input_size, prefix, params)
        self._activation = activation
        self._recurrent_activation = recurrent_activation


class LSTMCell(_RecurrentGatedCell):
    """Long short-term memory cell; states are ``[h, c]``."""

    _gates = 4
    _num_states = 2

    def _alias(self) -> str:
        return "lstm"

    def hybrid_forward(self, F: Any, x: Any, states: Any, i2h_weight: Any, h2h_weight: Any,  # noqa: N803
                       i2h_bias: Any, h2h_bias: Any) -> Any:
        i2h, h2h = self._projections(F, x, states[0], i2h_weight, h2h_weight, i2h_bias, h2h_bias)
        return lstm_step(F, i2h, h2h, states, self._activation, self._recurrent_activation,
                         _Names(F, self._counter))


class GRUCell(_RecurrentGatedCell):
    """Gated recurrent unit cell (Cho et al.; the reset gate scales ``W_h h + b_h``)."""

    _gates = 3

    def _alias(self) -> str:
        return "gru"

    def hybrid_forward(self, F: Any, x: Any, states: Any, i2h_weight: Any, h2h_weight: Any,  # noqa: N803
                       i2h_bias: Any, h2h_bias: Any) -> Any:
        i2h, h2h = self._projections(F, x, states[0], i2h_weight, h2h_weight, i2h_bias, h2h_bias)
        return gru_step(F, i2h, h2h, states, self._activation, self._recurrent_activation,
                        _Names(F, self._counter))
