"""nn.Reshape: a declarative reshape layer (job specs cannot hold a HybridLambda)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import engine as mx
from engine.gluon import nn
from engine.gluon.symbol_block import exported


def test_reshape_uses_mxnets_codes_and_exports_as_the_reshape_operator() -> None:
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.create("Reshape", shape=[0, 1, 8, 8]), nn.Conv2D(2, 3), nn.Flatten())
    net.initialize()
    x = mx.nd.array(np.random.default_rng(0).random((3, 64)).astype(np.float32))
    imperative = net(x)
    assert imperative.shape == (3, 2 * 6 * 6)
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), imperative.asnumpy(), rtol=1e-6)
    symbol_json, _ = exported(net)
    reshape = next(n for n in json.loads(symbol_json)["nodes"] if n["op"] == "Reshape")
    assert reshape["attrs"]["shape"] == "(0, 1, 8, 8)"
    assert nn.Reshape(shape=(-1, 4))(mx.nd.ones((2, 2, 2))).shape == (2, 4)


@pytest.mark.parametrize("shape", [(), (-1, -1), (2, -2)])
def test_a_shape_mxnet_would_not_take_here_is_refused(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="Reshape"):
        nn.Reshape(shape=shape)
