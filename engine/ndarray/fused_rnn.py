"""MXNet's fused ``RNN`` operator: stacked, optionally bidirectional vanilla (relu/tanh),
LSTM or GRU layers over time-major data (T, N, C), all weights packed in one vector.

The packed order is MXNet's: every layer's and direction's ``i2h`` then ``h2h`` weight, then
the biases in the same order. Each (layer, direction) runs as one
:func:`engine.ndarray.rnn_ops.recurrence` node (hand-written BPTT), the same time loop the
Gluon recurrent layers use, so ``mx.nd.RNN``, ``mx.sym.RNN`` and ``gluon.rnn`` share it.

>>> from engine import nd
>>> size = rnn_param_size("gru", 3, 1, False, 2)
>>> out = nd.RNN(nd.ones((5, 2, 2)), nd.ones((size,)) * 0.1, nd.zeros((1, 2, 3)),
...              state_size=3, num_layers=1, mode="gru")
>>> out.shape
(5, 2, 3)
"""

from __future__ import annotations

from typing import Any

from .ndarray import NDArray
from .nn_ops import dropout, fully_connected
from .rnn_ops import recurrence
from .shape_ops import concat, getitem, stack

GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


def rnn_param_size(mode: str, state_size: int, num_layers: int, bidirectional: bool,
                   channels: int) -> int:
    """Length of the packed ``parameters`` vector MXNet's ``RNN`` expects."""
    gates, dirs = GATES[mode], 2 if bidirectional else 1
    size = 0
    for layer in range(num_layers):
        inputs = channels if layer == 0 else state_size * dirs
        size += dirs * (gates * state_size * (inputs + state_size) + 2 * gates * state_size)
    return size


def _unpack(flat: NDArray, mode: str, hidden: int, num_layers: int, dirs: int,
            channels: int) -> list[list[tuple[NDArray, ...]]]:
    """``[layer][direction] -> (w_i2h, w_h2h, b_i2h, b_h2h)`` slices of the packed vector
    (differentiable views, so the gradient lands in ``parameters``)."""
    rows = GATES[mode] * hidden
    offset = 0

    def take(size: int, shape: tuple[int, ...]) -> NDArray:
        nonlocal offset
        part = getitem(flat, slice(offset, offset + size)).reshape(shape)
        offset += size
        return part

    weights = []
    for layer in range(num_layers):
        inputs = channels if layer == 0 else hidden * dirs
        weights.append([(take(rows * inputs, (rows, inputs)), take(rows * hidden, (rows, hidden)))
                        for _ in range(dirs)])
    return [[weights[layer][d] + (take(rows, (rows,)), take(rows, (rows,)))
             for d in range(dirs)] for layer in range(num_layers)]


def _reversed_in_time(x: NDArray) -> NDArray:
    return getitem(x, slice(None, None, -1))


def RNN(data: NDArray, parameters: NDArray, state: NDArray,  # noqa: N802 - MXNet's name
        state_cell: NDArray | None = None, *, state_size: int, num_layers: int, mode: str,
        bidirectional: bool = False, p: float = 0.0, state_outputs: bool = False,
        projection_size: int | None = None, lstm_state_clip_min: float | None = None,
        lstm_state_clip_max: float | None = None, lstm_state_clip_nan: bool = False,
        use_sequence_length: bool = False, **_: Any) -> Any:
    """Run the recurrence; returns the output (T, N, dirs*H), plus with ``state_outputs`` the
    final hidden states (layers*dirs, N, H) and, for an LSTM, the final cell states.
    ``p`` is the dropout between layers, applied in training mode only."""
    from .. import autograd

    if mode not in GATES:
        raise ValueError(f"RNN: mode must be one of {sorted(GATES)}, got {mode!r}")
    if projection_size is not None or use_sequence_length:
        raise NotImplementedError("RNN: projection_size and use_sequence_length are not "
                                  "supported by Rudder")
    lstm = mode == "lstm"
    if lstm and state_cell is None:
        raise ValueError("RNN: mode='lstm' needs state_cell")
    steps, batch, channels = data.shape
    dirs = 2 if bidirectional else 1
    expected = rnn_param_size(mode, state_size, num_layers, bidirectional, channels)
    if parameters.size != expected:
        raise ValueError(f"RNN: parameters has {parameters.size} values, {expected} expected")
    clip = (None if lstm_state_clip_min is None and lstm_state_clip_max is None
            else (lstm_state_clip_min, lstm_state_clip_max))
    layers = _unpack(parameters, mode, state_size, num_layers, dirs, channels)
    x = data
    last_h, last_c = [], []
    for layer, row in enumerate(layers):
        outs = []
        for d, (w_i2h, w_h2h, b_i2h, b_h2h) in enumerate(row):
            index = layer * dirs + d
            source = x if d == 0 else _reversed_in_time(x)
            proj = fully_connected(source.reshape((steps * batch, -1)), w_i2h, b_i2h,
                                   num_hidden=w_i2h.shape[0]).reshape((steps, batch, -1))
            every = recurrence(proj, getitem(state, index),
                               getitem(state_cell, index) if lstm else None,  # type: ignore[arg-type]
                               w_h2h, b_h2h, mode, clip)
            hidden = getitem(every, (slice(None), slice(None), slice(0, state_size)))
            last_h.append(getitem(hidden, steps - 1))
            if lstm:
                last_c.append(getitem(every, (steps - 1, slice(None), slice(state_size, None))))
            outs.append(hidden if d == 0 else _reversed_in_time(hidden))
        x = outs[0] if dirs == 1 else concat(*outs, dim=2)
        if p > 0 and layer < num_layers - 1 and autograd.is_training():
            x = dropout(x, p)
    if not state_outputs:
        return x
    return [x, stack(*last_h, axis=0)] + ([stack(*last_c, axis=0)] if lstm else [])
