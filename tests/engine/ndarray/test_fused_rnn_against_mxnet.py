"""Differential tests: ``nd.RNN`` (MXNet's fused recurrent operator) gives MXNet 1.9.1's
outputs, final states and gradients of the data, the packed parameters and the states."""

from __future__ import annotations

import numpy as np
import pytest

from engine import autograd, nd
from engine.ndarray.fused_rnn import rnn_param_size
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

STEPS, BATCH, CHANNELS, HIDDEN = 4, 2, 3, 5
# case -> (mode, num_layers, bidirectional)
CASES = {
    "lstm_bi2": ("lstm", 2, True),
    "gru2": ("gru", 2, False),
    "tanh_bi": ("rnn_tanh", 1, True),
    "relu": ("rnn_relu", 1, False),
}


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(21)
    arrays = {"x": rng.normal(size=(STEPS, BATCH, CHANNELS)).astype(np.float32)}
    for case, (mode, layers, bi) in CASES.items():
        size = rnn_param_size(mode, HIDDEN, layers, bi, CHANNELS)
        arrays[f"w_{case}"] = rng.uniform(-0.4, 0.4, size).astype(np.float32)
        arrays[f"h_{case}"] = rng.normal(size=(layers * (1 + bi), BATCH, HIDDEN)).astype(
            np.float32)
    return arrays


SNIPPET = f"""
for case, (mode, layers, bi) in {CASES!r}.items():
    args = [nd.array(inputs['x']), nd.array(inputs['w_' + case]), nd.array(inputs['h_' + case])]
    if mode == 'lstm':
        args.append(nd.array(inputs['h_' + case]) * 0.5)
    for a in args:
        a.attach_grad()
    with autograd.record():
        outs = nd.RNN(*args, state_size={HIDDEN}, num_layers=layers, bidirectional=bi,
                      mode=mode, state_outputs=True)
        total = sum((o * (k + 1)).sum() for k, o in enumerate(outs))
    total.backward()
    for k, o in enumerate(outs):
        outputs['%s_out%d' % (case, k)] = o
    for k, a in enumerate(args):
        outputs['%s_grad%d' % (case, k)] = a.grad
"""


@pytest.fixture(scope="module")
def oracle():
    return run_mxnet(SNIPPET, _inputs())


@pytest.mark.parametrize("case", sorted(CASES))
def test_rnn_outputs_states_and_gradients_match_mxnet(oracle, case: str) -> None:
    mode, layers, bi = CASES[case]
    inputs = _inputs()
    args = [nd.array(inputs["x"]), nd.array(inputs[f"w_{case}"]), nd.array(inputs[f"h_{case}"])]
    if mode == "lstm":
        args.append(nd.array(inputs[f"h_{case}"]) * 0.5)
    for arr in args:
        arr.attach_grad()
    with autograd.record():
        outs = nd.RNN(*args, state_size=HIDDEN, num_layers=layers, bidirectional=bi,
                      mode=mode, state_outputs=True)
        total = sum((o * (k + 1)).sum() for k, o in enumerate(outs))
    total.backward()
    assert len(outs) == (3 if mode == "lstm" else 2)
    for k, out in enumerate(outs):
        np.testing.assert_allclose(out.asnumpy(), oracle[f"{case}_out{k}"], rtol=1e-4,
                                   atol=1e-5, err_msg=f"{case} output {k}")
    for k, arr in enumerate(args):
        np.testing.assert_allclose(arr.grad.asnumpy(), oracle[f"{case}_grad{k}"], rtol=1e-3,
                                   atol=1e-4, err_msg=f"{case} gradient {k}")


def test_rnn_rejects_a_parameter_vector_of_the_wrong_size() -> None:
    with pytest.raises(ValueError, match="parameters"):
        nd.RNN(nd.ones((STEPS, BATCH, CHANNELS)), nd.ones((7,)), nd.zeros((1, BATCH, HIDDEN)),
               state_size=HIDDEN, num_layers=1, mode="gru")
