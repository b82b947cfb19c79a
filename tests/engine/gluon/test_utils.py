"""gluon.utils (split_and_load, split_data, clip_global_norm) and data-parallel training
over several contexts (cpu(0) and cpu(1) stand in for GPUs)."""

import numpy as np
import pytest

from engine import autograd, cpu, gluon, init, nd
from engine.gluon import utils


def test_split_data_even_and_uneven():
    x = nd.arange(10).reshape((5, 2))
    with pytest.raises(ValueError, match="cannot be evenly split"):
        utils.split_data(x, 2)
    parts = utils.split_data(x, 2, even_split=False)
    assert [p.shape for p in parts] == [(3, 2), (2, 2)]
    cols = utils.split_data(nd.ones((2, 6)), 3, batch_axis=1)
    assert [p.shape for p in cols] == [(2, 2)] * 3
    with pytest.raises(ValueError, match="Too many slices"):
        utils.split_data(nd.ones((2, 2)), 3, even_split=False)


def test_split_and_load_trains_on_several_contexts():
    ctxs = [cpu(0), cpu(1)]
    net = gluon.nn.Dense(1, in_units=3)
    net.initialize(init.One(), ctx=ctxs)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    parts = utils.split_and_load(x, ctxs)
    assert [p.context for p in parts] == ctxs
    with autograd.record():
        losses = [net(p).sum() for p in parts]
    for loss in losses:
        loss.backward()
    grads = [g.asnumpy() for g in net.weight.list_grad()]
    np.testing.assert_allclose(grads[0], x[:2].sum(0, keepdims=True))
    np.testing.assert_allclose(grads[1], x[2:].sum(0, keepdims=True))


def test_clip_global_norm_scales_in_place():
    arrays = [nd.array([3.0, 0.0]), nd.array([[4.0]])]
    norm = utils.clip_global_norm(arrays, 1.0)
    assert norm == pytest.approx(5.0)
    np.testing.assert_allclose(arrays[0].asnumpy(), [0.6, 0.0], rtol=1e-5)
    np.testing.assert_allclose(arrays[1].asnumpy(), [[0.8]], rtol=1e-5)
    untouched = [nd.array([0.1])]
    utils.clip_global_norm(untouched, 1.0)
    np.testing.assert_allclose(untouched[0].asnumpy(), [0.1])
    with pytest.warns(UserWarning, match="nan or inf"):
        utils.clip_global_norm([nd.array([np.inf])], 1.0)


def test_gluon_lazy_attributes():
    assert gluon.Trainer.__name__ == "Trainer"
    with pytest.raises(AttributeError, match="no attribute 'Trainr'"):
        gluon.Trainr  # noqa: B018
