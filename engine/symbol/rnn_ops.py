"""MXNet's fused ``RNN`` operator as a symbol node.

The computation is :func:`engine.ndarray.fused_rnn.RNN` (shared with ``mx.nd.RNN`` and the
Gluon layers' time loop); this module declares the node: its inputs (``state_cell`` only
for an LSTM), the shapes it infers for the packed parameters and states, and its outputs.
"""

from __future__ import annotations

from typing import Any

from ..ndarray import NDArray
from ..ndarray.fused_rnn import GATES, RNN, rnn_param_size
from .ops import _POSITIVE, _REQUIRED, OpSpec, Shape, _bool, _choice, _op, _opt_float, _rate


def _directions(p: dict[str, Any]) -> int:
    return 2 if p["bidirectional"] else 1


def _rnn_infer(p: dict[str, Any], shapes: list[Shape | None]):
    data = shapes[0]
    if data is None:
        return shapes, None
    steps, batch, channels = data
    states = (p["num_layers"] * _directions(p), batch, p["state_size"])
    size = rnn_param_size(p["mode"], p["state_size"], p["num_layers"], p["bidirectional"],
                          channels)
    filled: list[Shape | None] = [data, (size,), states]
    if p["mode"] == "lstm":
        filled.append(states)
    out = (steps, batch, p["state_size"] * _directions(p))
    if not p["state_outputs"]:
        return filled, out
    return filled, [out, states] + ([states] if p["mode"] == "lstm" else [])


def _rnn_forward(p: dict[str, Any], x: list[NDArray]) -> Any:
    return RNN(x[0], x[1], x[2], x[3] if len(x) > 3 else None, **p)


class _RNNSpec(OpSpec):
    def input_names(self, params: dict[str, Any], count: int = 0) -> tuple[str, ...]:
        names = ("data", "parameters", "state")
        return names + (("state_cell",) if params.get("mode") == "lstm" else ())


_op(_RNNSpec(
    "RNN", ("data", "parameters", "state", "state_cell"),
    {"state_size": (_POSITIVE, _REQUIRED), "num_layers": (_POSITIVE, _REQUIRED),
     "bidirectional": (_bool, False), "mode": (_choice(*GATES), _REQUIRED), "p": (_rate, 0.0),
     "state_outputs": (_bool, False), "projection_size": (_opt_float, None),
     "lstm_state_clip_min": (_opt_float, None), "lstm_state_clip_max": (_opt_float, None),
     "lstm_state_clip_nan": (_bool, False), "use_sequence_length": (_bool, False)},
    _rnn_infer, _rnn_forward,
    outputs=lambda p: (["output", "state_output"] + (["statecell_output"]
                                                      if p["mode"] == "lstm" else [])
                       if p["state_outputs"] else ["output"]),
))
