"""``engine.gluon.rnn``: recurrent layers and cells with MXNet 1.9.1's names and numerics.

>>> import engine as mx
>>> layer = mx.gluon.rnn.GRU(3, layout="NTC"); layer.initialize()
>>> layer(mx.nd.ones((2, 4, 5))).shape
(2, 4, 3)
"""

from .cell_modifiers import (
    BidirectionalCell,
    DropoutCell,
    HybridSequentialRNNCell,
    ModifierCell,
    ResidualCell,
    SequentialRNNCell,
    ZoneoutCell,
)
from .rnn_cell import GRUCell, HybridRecurrentCell, LSTMCell, RecurrentCell, RNNCell
from .rnn_layer import GRU, LSTM, RNN

__all__ = [
    "BidirectionalCell", "DropoutCell", "GRU", "GRUCell", "HybridRecurrentCell",
    "HybridSequentialRNNCell", "LSTM", "LSTMCell", "ModifierCell", "RNN", "RNNCell",
    "RecurrentCell", "ResidualCell", "SequentialRNNCell", "ZoneoutCell",
]
