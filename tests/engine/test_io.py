"""engine.io: NDArrayIter's last-batch modes, names/descriptions and shuffling."""

import numpy as np
import pytest

import engine
from engine.io import DataBatch, DataDesc, NDArrayIter

X = np.arange(20, dtype=np.float32).reshape(10, 2)
Y = np.arange(10, dtype=np.float32)


def labels(it):
    return [(b.label[0].asnumpy().tolist(), b.pad) for b in it]


def test_pad_wraps_around_and_reports_pad():
    it = NDArrayIter(X, Y, batch_size=4)
    assert labels(it) == [([0, 1, 2, 3], 0), ([4, 5, 6, 7], 0), ([8, 9, 0, 1], 2)]
    it.reset()
    assert len(labels(it)) == 3


def test_discard_drops_the_incomplete_batch():
    it = NDArrayIter(X, Y, batch_size=4, last_batch_handle="discard")
    assert labels(it) == [([0, 1, 2, 3], 0), ([4, 5, 6, 7], 0)]


def test_roll_over_carries_the_tail_into_the_next_epoch():
    it = NDArrayIter(X, Y, batch_size=4, last_batch_handle="roll_over")
    assert [b for b, _ in labels(it)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    it.reset()
    assert labels(it) == [([8, 9, 0, 1], 2), ([2, 3, 4, 5], 0), ([6, 7, 8, 9], 0)]


def test_names_descriptions_and_dict_inputs():
    it = NDArrayIter({"b": X, "a": X * 2}, {"lab": Y}, batch_size=5)
    assert [d.name for d in it.provide_data] == ["a", "b"]
    assert it.provide_data[0] == DataDesc("a", (5, 2)) and it.provide_label[0].shape == (5,)
    batch = next(iter(it))
    assert isinstance(batch, DataBatch) and len(batch.data) == 2
    np.testing.assert_array_equal(batch.data[0].asnumpy(), X[:5] * 2)
    default = NDArrayIter(X, Y, batch_size=2)
    assert default.provide_data[0].name == "data"
    assert default.provide_label[0].name == "softmax_label"
    multi = NDArrayIter([X, X], batch_size=2)
    assert [d.name for d in multi.provide_data] == ["_0_data", "_1_data"]
    assert NDArrayIter(X, batch_size=3).provide_label == []


def test_shuffle_keeps_pairs_and_is_seeded():
    engine.random.seed(4)
    it = NDArrayIter(X, Y, batch_size=5, shuffle=True)
    batches = list(it)
    for b in batches:
        np.testing.assert_array_equal(b.data[0].asnumpy()[:, 0], 2 * b.label[0].asnumpy())
    order = np.concatenate([b.label[0].asnumpy() for b in batches])
    assert sorted(order.tolist()) == list(range(10)) and order.tolist() != list(range(10))
    engine.random.seed(4)
    again = np.concatenate([b.label[0].asnumpy() for b in NDArrayIter(X, Y, 5, shuffle=True)])
    np.testing.assert_array_equal(order, again)


def test_bad_arguments():
    with pytest.raises(ValueError, match="same first dimension"):
        NDArrayIter(X, Y[:5], batch_size=2)
    with pytest.raises(ValueError, match="last_batch_handle"):
        NDArrayIter(X, Y, batch_size=2, last_batch_handle="wrap")
    with pytest.raises(TypeError, match="Data must be list"):
        DataBatch(data=X)
