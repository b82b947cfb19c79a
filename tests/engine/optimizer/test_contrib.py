"""``mx.optimizer.contrib.GroupAdaGrad`` and ``mx.optimizer.NDabs`` against MXNet 1.9.1."""

from __future__ import annotations

import numpy as np
import pytest

import engine as mx
from engine import nd
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

W = np.random.default_rng(0).uniform(-1, 1, (4, 3)).astype(np.float32)
G = np.random.default_rng(1).uniform(-1, 1, (4, 3)).astype(np.float32)

SNIPPET = """
o = mx.optimizer.contrib.GroupAdaGrad(learning_rate=0.1, rescale_grad=0.5, clip_gradient=0.2)
w = nd.array(inputs['w']); state = o.create_state(0, w)
for _ in range(3):
    o.update(0, w, nd.array(inputs['g']), state)
outputs['w'] = w; outputs['h'] = state
outputs['abs'] = mx.optimizer.NDabs(nd.array(inputs['g']))
try:
    mx.optimizer.contrib.GroupAdaGrad(wd=0.1).update(0, w, nd.array(inputs['g']), state)
    result['wd'] = 'ok'
except Exception as err:
    result['wd'] = type(err).__name__
"""


def test_group_adagrad_matches_mxnet() -> None:
    theirs = run_mxnet(SNIPPET, {"w": W, "g": G})
    o = mx.optimizer.contrib.GroupAdaGrad(learning_rate=0.1, rescale_grad=0.5, clip_gradient=0.2)
    w = nd.array(W)
    state = o.create_state(0, w)
    for _ in range(3):
        o.update(0, w, nd.array(G), state)
    np.testing.assert_allclose(w.asnumpy(), theirs["w"], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(state.asnumpy(), theirs["h"], rtol=1e-5)
    np.testing.assert_allclose(mx.optimizer.NDabs(nd.array(G)).asnumpy(), theirs["abs"])
    assert theirs.json["wd"] != "ok"
    with pytest.raises(ValueError):
        mx.optimizer.contrib.GroupAdaGrad(wd=0.1).update(0, w, nd.array(G), state)
    assert type(mx.optimizer.create("groupadagrad")).__name__ == "GroupAdaGrad"


def test_set_lr_scale_is_removed_as_in_mxnet() -> None:
    with pytest.raises(DeprecationWarning):
        mx.optimizer.SGD().set_lr_scale({0: 0.5})
