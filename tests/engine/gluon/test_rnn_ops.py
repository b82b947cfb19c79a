"""The fused recurrence behind the recurrent layers: its hand-written backpropagation through
time against float64 central differences, for every mode, with LSTM state clipping, on
numpy (and cupy where a GPU is present)."""

import numpy as np
import pytest

from engine.ndarray.rnn_ops import recurrence
from tests.engine.gradcheck import CONTEXTS, check_grad

rng = np.random.RandomState(2)
STEPS, BATCH, HIDDEN = 4, 3, 5


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize(("mode", "gates"), [("lstm", 4), ("gru", 3), ("rnn_tanh", 1),
                                             ("rnn_relu", 1)])
def test_recurrence_gradients_match_finite_differences(ctx, mode, gates):
    proj = rng.randn(STEPS, BATCH, gates * HIDDEN)
    h0 = rng.randn(BATCH, HIDDEN) * 0.5
    c0 = rng.randn(BATCH, HIDDEN) * 0.5
    w = rng.randn(gates * HIDDEN, HIDDEN) * 0.4
    b = rng.randn(gates * HIDDEN) * 0.1
    if mode == "lstm":
        check_grad(lambda p, h, c, w_, b_: recurrence(p, h, c, w_, b_, mode),
                   [proj, h0, c0, w, b], ctx=ctx)
    else:
        check_grad(lambda p, h, w_, b_: recurrence(p, h, None, w_, b_, mode),
                   [proj, h0, w, b], ctx=ctx)


@pytest.mark.parametrize("ctx", CONTEXTS)
def test_clipped_lstm_cell_state_gradients_match_finite_differences(ctx):
    proj = rng.randn(STEPS, BATCH, 4 * HIDDEN) * 2
    h0, c0 = rng.randn(BATCH, HIDDEN), rng.randn(BATCH, HIDDEN) * 0.1
    w, b = rng.randn(4 * HIDDEN, HIDDEN) * 0.4, rng.randn(4 * HIDDEN) * 0.1
    clip = (-0.35, 0.45)
    check_grad(lambda p, h, c, w_, b_: recurrence(p, h, c, w_, b_, "lstm", clip),
               [proj, h0, c0, w, b], ctx=ctx)
