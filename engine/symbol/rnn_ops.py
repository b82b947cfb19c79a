"""MXNet's fused ``RNN`` operator on symbols: vanilla (relu/tanh), LSTM and GRU layers,
stacked and optionally bidirectional, over time-major data (T, N, C).

All weights come packed in one ``parameters`` vector, in MXNet's order: every layer's
and direction's ``i2h`` then ``h2h`` weight, then the biases in the same order. Gates are
MXNet's: LSTM ``i, f, g, o``; GRU ``r, z, n`` with ``n = tanh(W_n x + b_n + r * (U_n h +
c_n))``. The step is written with differentiable NDArray ops, so autograd gives the
gradients of the data, the parameters and the initial states.
"""

from __future__ import annotations

from typing import Any

from ..ndarray import NDArray
from ..ndarray.nn_ops import dropout, fully_connected
from ..ndarray.ops import unary
from ..ndarray.shape_ops import concat, getitem, stack
from .ops import _REQUIRED, OpSpec, Shape, _bool, _op, _opt_float

_GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


def _directions(p: dict[str, Any]) -> int:
    return 2 if p["bidirectional"] else 1


def _param_size(p: dict[str, Any], channels: int) -> int:
    gates, hidden, dirs = _GATES[p["mode"]], p["state_size"], _directions(p)
    size = 0
    for layer in range(p["num_layers"]):
        inputs = channels if layer == 0 else hidden * dirs
        size += dirs * (gates * hidden * (inputs + hidden) + 2 * gates * hidden)
    return size


def _rnn_infer(p: dict[str, Any], shapes: list[Shape | None]):
    data = shapes[0]
    if data is None:
        return shapes, None
    steps, batch, channels = data
    states = (p["num_layers"] * _directions(p), batch, p["state_size"])
    filled: list[Shape | None] = [data, (_param_size(p, channels),), states]
    if p["mode"] == "lstm":
        filled.append(states)
    out = (steps, batch, p["state_size"] * _directions(p))
    if not p["state_outputs"]:
        return filled, out
    return filled, [out, states] + ([states] if p["mode"] == "lstm" else [])


def _unpack(flat: NDArray, p: dict[str, Any], channels: int) -> list[list[tuple[Any, ...]]]:
    """``[layer][direction] -> (w_i2h, w_h2h, b_i2h, b_h2h)`` views of the flat vector."""
    gates, hidden, dirs = _GATES[p["mode"]], p["state_size"], _directions(p)
    weights, offset = [], 0
    for layer in range(p["num_layers"]):
        inputs = channels if layer == 0 else hidden * dirs
        row = []
        for _ in range(dirs):
            pair = []
            for cols in (inputs, hidden):
                size = gates * hidden * cols
                pair.append(getitem(flat, slice(offset, offset + size)).reshape(
                    (gates * hidden, cols)))
                offset += size
            row.append(pair)
        weights.append(row)
    params = []
    for layer in range(p["num_layers"]):
        row = []
        for d in range(dirs):
            biases = []
            for _ in range(2):
                biases.append(getitem(flat, slice(offset, offset + gates * hidden)))
                offset += gates * hidden
            row.append(tuple(weights[layer][d]) + tuple(biases))
        params.append(row)
    return params


def _step(mode: str, x_proj: NDArray, h: NDArray, c: NDArray | None, w_h2h: NDArray,
          b_h2h: NDArray, hidden: int, clip: tuple[Any, Any] = (None, None)
          ) -> tuple[NDArray, NDArray | None]:
    h_proj = fully_connected(h, w_h2h, b_h2h, num_hidden=w_h2h.shape[0])

    def gate(arr: NDArray, k: int) -> NDArray:
        return getitem(arr, (slice(None), slice(k * hidden, (k + 1) * hidden)))

    if mode in ("rnn_relu", "rnn_tanh"):
        return unary("relu" if mode == "rnn_relu" else "tanh", x_proj + h_proj), None
    if mode == "lstm":
        total = x_proj + h_proj
        i, f = unary("sigmoid", gate(total, 0)), unary("sigmoid", gate(total, 1))
        g, o = unary("tanh", gate(total, 2)), unary("sigmoid", gate(total, 3))
        assert c is not None
        c_new = f * c + i * g
        if clip != (None, None):  # lstm_state_clip_min/max bound the cell state
            from ..ndarray.ops import clip as clip_op

            c_new = clip_op(c_new, clip[0], clip[1])
        return o * unary("tanh", c_new), c_new
    r = unary("sigmoid", gate(x_proj, 0) + gate(h_proj, 0))
    z = unary("sigmoid", gate(x_proj, 1) + gate(h_proj, 1))
    n = unary("tanh", gate(x_proj, 2) + r * gate(h_proj, 2))
    return (1 - z) * n + z * h, None


def rnn(data: NDArray, parameters: NDArray, state: NDArray, state_cell: NDArray | None = None,
        **p: Any) -> Any:
    """Run the stacked (bi)directional recurrence; outputs as MXNet's ``RNN``."""
    from .. import autograd

    steps, batch, channels = data.shape
    hidden, dirs, mode = p["state_size"], _directions(p), p["mode"]
    layers = _unpack(parameters, p, channels)
    inputs = data
    last_h, last_c = [], []
    for layer, row in enumerate(layers):
        outs = []
        for d, (w_i2h, w_h2h, b_i2h, b_h2h) in enumerate(row):
            index = layer * dirs + d
            h = getitem(state, index)
            c = getitem(state_cell, index) if mode == "lstm" and state_cell is not None else None
            proj = fully_connected(inputs.reshape((steps * batch, -1)), w_i2h, b_i2h,
                                   num_hidden=w_i2h.shape[0]).reshape((steps, batch, -1))
            order = range(steps) if d == 0 else range(steps - 1, -1, -1)
            seq: list[NDArray] = [None] * steps  # type: ignore[list-item]
            for t in order:
                h, c = _step(mode, getitem(proj, t), h, c, w_h2h, b_h2h, hidden,
                             (p["lstm_state_clip_min"], p["lstm_state_clip_max"]))
                seq[t] = h
            outs.append(stack(*seq, axis=0))
            last_h.append(h)
            if c is not None:
                last_c.append(c)
        inputs = outs[0] if dirs == 1 else concat(*outs, dim=2)
        if p["p"] > 0 and layer < len(layers) - 1 and autograd.is_training():
            inputs = dropout(inputs, p["p"])
    if not p["state_outputs"]:
        return inputs
    result = [inputs, stack(*last_h, axis=0)]
    if mode == "lstm":
        result.append(stack(*last_c, axis=0))
    return result


def _rnn_forward(p: dict[str, Any], x: list[NDArray]) -> Any:
    if p["projection_size"] is not None or p["use_sequence_length"]:
        raise NotImplementedError("RNN: projection_size and use_sequence_length are not "
                                  "supported by Rudder")
    return rnn(x[0], x[1], x[2], x[3] if len(x) > 3 else None, **p)


class _RNNSpec(OpSpec):
    def input_names(self, params: dict[str, Any], count: int = 0) -> tuple[str, ...]:
        names = ("data", "parameters", "state")
        return names + (("state_cell",) if params.get("mode") == "lstm" else ())


_op(_RNNSpec(
    "RNN", ("data", "parameters", "state", "state_cell"),
    {"state_size": (int, _REQUIRED), "num_layers": (int, _REQUIRED),
     "bidirectional": (_bool, False), "mode": (str, _REQUIRED), "p": (float, 0.0),
     "state_outputs": (_bool, False), "projection_size": (_opt_float, None),
     "lstm_state_clip_min": (_opt_float, None), "lstm_state_clip_max": (_opt_float, None),
     "lstm_state_clip_nan": (_bool, False), "use_sequence_length": (_bool, False)},
    _rnn_infer, _rnn_forward,
    outputs=lambda p: (["output", "state_output"] + (["statecell_output"]
                                                      if p["mode"] == "lstm" else [])
                       if p["state_outputs"] else ["output"]),
))
