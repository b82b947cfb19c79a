"""Multi-layer recurrent layers ``RNN``, ``LSTM`` and ``GRU`` (MXNet 1.9.1's fused-layer API).

Parameters are named ``{l|r}{layer}_{i2h|h2h}_{weight|bias}`` on the layer itself, with the
cells' gate orders; the input projection of every step is computed at once, the recurrence
step by step with the same step functions as the cells, so the numbers match the cells'.

>>> import engine as mx
>>> layer = mx.gluon.rnn.LSTM(4, num_layers=2, bidirectional=True); layer.initialize()
>>> x = mx.nd.ones((5, 3, 2))  # TNC
>>> out, (h, c) = layer(x, layer.begin_state(batch_size=3))
>>> out.shape, h.shape
((5, 3, 8), (4, 3, 4))
"""

from __future__ import annotations

import re
from typing import Any

from ... import ndarray as nd
from ...ndarray.ndarray import NDArray
from ...ndarray.rnn_ops import recurrence
from ..block import HybridBlock
from .sequence import last_valid, mask_invalid, reverse_valid

_PARAM_KEY = re.compile(r"(l|r)(\d+)_(i2h|h2h)_(weight|bias)\Z")


class _RNNLayer(HybridBlock):
    """Shared implementation of the recurrent layers."""

    def __init__(self, hidden_size: int, num_layers: int, layout: str, dropout: float,
                 bidirectional: bool, input_size: int, i2h_weight_initializer: Any,
                 h2h_weight_initializer: Any, i2h_bias_initializer: Any,
                 h2h_bias_initializer: Any, mode: str, projection_size: Any,
                 h2r_weight_initializer: Any, lstm_state_clip_min: Any,
                 lstm_state_clip_max: Any, lstm_state_clip_nan: bool, dtype: Any,
                 use_sequence_length: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if layout not in ("TNC", "NTC"):
            raise AssertionError(f"Invalid layout {layout}; must be one of ['TNC' or 'NTC']")
        if projection_size:
            # MXNet 1.9.1 runs LSTM projections only in its cuDNN (GPU) kernel
            raise NotImplementedError("LSTM projection_size is GPU-only in MXNet 1.9.1 and "
                                      "not supported by Rudder")
        self._hidden_size = hidden_size
        self._num_layers = num_layers
        self._mode = mode
        self._layout = layout
        self._dropout = dropout
        self._dir = 2 if bidirectional else 1
        self._input_size = input_size
        self._initializers = (i2h_weight_initializer, h2h_weight_initializer,
                              i2h_bias_initializer, h2h_bias_initializer)
        self._clip = None
        if lstm_state_clip_min is not None or lstm_state_clip_max is not None:
            self._clip = (lstm_state_clip_min, lstm_state_clip_max)
        self._use_sequence_length = use_sequence_length
        self.skip_states: bool | None = None
        self._gates = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}[mode]
        rows, ni = self._gates * hidden_size, input_size
        for i in range(num_layers):
            for j in ["l", "r"][:self._dir]:
                self._register(f"{j}{i}_i2h_weight", (rows, ni), i2h_weight_initializer, dtype)
                self._register(f"{j}{i}_h2h_weight", (rows, hidden_size),
                               h2h_weight_initializer, dtype)
                self._register(f"{j}{i}_i2h_bias", (rows,), i2h_bias_initializer, dtype)
                self._register(f"{j}{i}_h2h_bias", (rows,), h2h_bias_initializer, dtype)
            ni = hidden_size * self._dir

    def _register(self, name: str, shape: tuple[int, ...], init: Any, dtype: Any) -> None:
        param = self.params.get(name, shape=shape, init=init, allow_deferred_init=True,
                                dtype=dtype)
        setattr(self, name, param)

    def __repr__(self) -> str:
        shape = self.l0_i2h_weight.shape
        text = (f"{type(self).__name__}({shape[1] if shape[1] else None} -> "
                f"{shape[0] // self._gates}, {self._layout}")
        if self._num_layers != 1:
            text += f", num_layers={self._num_layers}"
        if self._dropout != 0:
            text += f", dropout={self._dropout}"
        if self._dir == 2:
            text += ", bidirectional"
        return text + ")"

    def _collect_params_with_prefix(self, prefix: str = "") -> dict[str, Any]:
        # MXNet saves the layer's weights under the names of its unfused cells
        if prefix:
            prefix += "."
        bidirectional = self._dir == 2
        out = {}
        for key, value in self._reg_params.items():
            match = _PARAM_KEY.match(key)
            assert match is not None
            d, layer, kind, typ = match.groups()
            cell = f"{d}_cell." if bidirectional else ""
            out[f"{prefix}_unfused.{layer}.{cell}{kind}_{typ}"] = value
        return out

    def _unfuse(self) -> Any:
        """The same network as a stack of cells sharing this layer's parameters."""
        from .cell_modifiers import BidirectionalCell, DropoutCell, HybridSequentialRNNCell
        from .rnn_cell import GRUCell, LSTMCell, RNNCell

        def make(**kwargs: Any) -> Any:
            if self._mode == "lstm":
                return LSTMCell(self._hidden_size, **kwargs)
            if self._mode == "gru":
                return GRUCell(self._hidden_size, **kwargs)
            return RNNCell(self._hidden_size, self._mode[len("rnn_"):], **kwargs)

        if self._clip is not None:
            raise AssertionError("_unfuse does not support state clipping yet!")
        stack = HybridSequentialRNNCell(prefix=self.prefix, params=self.params)
        with stack.name_scope():
            ni = self._input_size
            for i in range(self._num_layers):
                kwargs = {"input_size": ni,
                          "i2h_weight_initializer": self._initializers[0],
                          "h2h_weight_initializer": self._initializers[1],
                          "i2h_bias_initializer": self._initializers[2],
                          "h2h_bias_initializer": self._initializers[3]}
                if self._dir == 2:
                    stack.add(BidirectionalCell(make(prefix=f"l{i}_", **kwargs),
                                                make(prefix=f"r{i}_", **kwargs)))
                else:
                    stack.add(make(prefix=f"l{i}_", **kwargs))
                if self._dropout > 0 and i != self._num_layers - 1:
                    stack.add(DropoutCell(self._dropout))
                ni = self._hidden_size * self._dir
        return stack

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        shape = (self._num_layers * self._dir, batch_size, self._hidden_size)
        count = 2 if self._mode == "lstm" else 1
        return [{"shape": shape, "__layout__": "LNC", "dtype": "float32"}
                for _ in range(count)]

    def begin_state(self, batch_size: int = 0, func: Any = nd.zeros, **kwargs: Any) -> list[Any]:
        """Initial states, each (num_layers·directions, batch, hidden), made by ``func``."""
        states = []
        for i, info in enumerate(self.state_info(batch_size)):
            info = dict(info or {}, **kwargs)
            states.append(func(name=f"{self.prefix}h0_{i}", **info))
        return states

    def infer_shape(self, inputs: Any, *args: Any) -> None:
        in_size = inputs.shape[-1]
        rows = self._gates * self._hidden_size
        for j in ["l", "r"][:self._dir]:
            getattr(self, f"{j}0_i2h_weight").shape = (rows, in_size)

    def __call__(self, inputs: Any, states: Any = None, sequence_length: Any = None,
                 **kwargs: Any) -> Any:
        self.skip_states = states is None
        if states is None:
            batch_size = inputs.shape[self._layout.find("N")]
            states = self.begin_state(batch_size, ctx=inputs.context, dtype=inputs.dtype)
        if isinstance(states, NDArray):
            states = [states]
        if self._use_sequence_length:
            return super().__call__(inputs, states, sequence_length, **kwargs)
        return super().__call__(inputs, states, **kwargs)

    def hybrid_forward(self, F: Any, inputs: Any, states: Any, sequence_length: Any = None,  # noqa: N803
                       **params: Any) -> Any:
        batch_size = inputs.shape[self._layout.find("N")]
        for state, info in zip(states, self.state_info(batch_size), strict=False):
            if state.shape != info["shape"]:
                raise ValueError(f"Invalid recurrent state shape. Expecting {info['shape']}, "
                                 f"got {state.shape}.")
        if self._layout == "NTC":
            inputs = F.swapaxes(inputs, 0, 1)
        outputs, new_states = self._run_layers(F, inputs, list(states), sequence_length, params)
        if self._layout == "NTC":
            outputs = F.swapaxes(outputs, 0, 1)
        return outputs if self.skip_states else (outputs, new_states)

    def _run_layers(self, F: Any, x: Any, states: list[Any], lengths: Any,  # noqa: N803
                    params: dict[str, Any]) -> tuple[Any, list[Any]]:
        finals: list[list[Any]] = [[] for _ in states]
        for layer in range(self._num_layers):
            directions = []
            for d, name in enumerate(["l", "r"][:self._dir]):
                slot = layer * self._dir + d
                init = [s[slot] for s in states]
                out, last = self._run_direction(F, x, init, f"{name}{layer}", name == "r",
                                                lengths, params)
                directions.append(out)
                for k, s in enumerate(last):
                    finals[k].append(s)
            x = directions[0] if self._dir == 1 else F.concat(*directions, dim=2)
            if self._dropout > 0 and layer != self._num_layers - 1:
                x = F.Dropout(x, p=self._dropout)
        return x, [F.stack(*f, axis=0) for f in finals]

    def _run_direction(self, F: Any, x: Any, states: list[Any], key: str, backward: bool,  # noqa: N803
                       lengths: Any, params: dict[str, Any]) -> tuple[Any, list[Any]]:
        steps, batch = x.shape[0], x.shape[1]
        rows = self._gates * self._hidden_size
        hidden = self._hidden_size
        if backward:
            x = reverse_valid(x, lengths) if lengths is not None else x[::-1]
        flat = x.reshape((steps * batch, x.shape[2]))
        i2h_all = F.FullyConnected(flat, params[key + "_i2h_weight"], params[key + "_i2h_bias"],
                                   num_hidden=rows).reshape((steps, batch, rows))
        # one fused node runs the time loop (hand-written BPTT); same numbers as the cells
        lstm = self._mode == "lstm"
        every = recurrence(i2h_all, states[0], states[1] if lstm else None,
                           params[key + "_h2h_weight"], params[key + "_h2h_bias"], self._mode,
                           self._clip)
        stacked = every[:, :, :hidden] if lstm else every
        history = [stacked, every[:, :, hidden:]] if lstm else [stacked]
        if lengths is not None:
            states = [last_valid(h, lengths) for h in history]
            stacked = mask_invalid(stacked, lengths, 0)
        else:
            states = [h[steps - 1] for h in history]
        if backward:
            stacked = reverse_valid(stacked, lengths) if lengths is not None else stacked[::-1]
        return stacked, states


class RNN(_RNNLayer):
    """Elman RNN layer with ``activation`` 'relu' (default) or 'tanh'.

    Call ``layer(x)`` for outputs only, ``layer(x, states)`` for (outputs, states).
    """

    def __init__(self, hidden_size: int, num_layers: int = 1, activation: str = "relu",
                 layout: str = "TNC", dropout: float = 0, bidirectional: bool = False,
                 i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros",
                 input_size: int = 0, dtype: Any = "float32", **kwargs: Any) -> None:
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, "rnn_" + activation, None, None, None, None,
                         False, dtype, **kwargs)


class LSTM(_RNNLayer):
    """Long short-term memory layer; states are ``[h, c]``."""

    def __init__(self, hidden_size: int, num_layers: int = 1, layout: str = "TNC",
                 dropout: float = 0, bidirectional: bool = False, input_size: int = 0,
                 i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros",
                 projection_size: Any = None, h2r_weight_initializer: Any = None,
                 state_clip_min: Any = None, state_clip_max: Any = None,
                 state_clip_nan: bool = False, dtype: Any = "float32", **kwargs: Any) -> None:
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, "lstm", projection_size, h2r_weight_initializer,
                         state_clip_min, state_clip_max, state_clip_nan, dtype, **kwargs)


class GRU(_RNNLayer):
    """Gated recurrent unit layer (cuDNN's form, as MXNet)."""

    def __init__(self, hidden_size: int, num_layers: int = 1, layout: str = "TNC",
                 dropout: float = 0, bidirectional: bool = False, input_size: int = 0,
                 i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros",
                 dtype: Any = "float32", **kwargs: Any) -> None:
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, "gru", None, None, None, None, False, dtype,
                         **kwargs)
