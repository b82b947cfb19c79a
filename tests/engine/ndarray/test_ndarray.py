"""NDArray creation, arithmetic, reductions, shape ops, indexing and errors."""

import numpy as np
import pytest

import engine
from engine import nd
from engine import np as enp


def test_creation_defaults_to_float32_like_mxnet():
    assert nd.array([1, 2, 3]).dtype == np.float32
    assert nd.array(np.arange(3)).dtype == np.float32
    assert nd.zeros((2, 3)).shape == (2, 3)
    assert nd.ones((2,), dtype="float64").dtype == np.float64
    np.testing.assert_allclose(nd.full((2,), 7).asnumpy(), [7, 7])
    np.testing.assert_allclose(nd.arange(0, 6, 2).asnumpy(), [0, 2, 4])
    assert enp.array([1, 2]).dtype == np.float32  # mx.np's default for Python data
    assert enp.array(np.arange(2)).dtype == np.int64  # a numpy array keeps its dtype
    assert enp.random.uniform(size=(4, 2)).shape == (4, 2)
    assert nd.random.normal(shape=(3,)).shape == (3,)


def test_seeding_makes_random_reproducible_and_state_round_trips():
    engine.random.seed(7)
    a = nd.random.uniform(shape=(5,)).asnumpy()
    state = engine.random.get_state()
    b = nd.random.uniform(shape=(5,)).asnumpy()
    engine.random.set_state(state)
    np.testing.assert_array_equal(nd.random.uniform(shape=(5,)).asnumpy(), b)
    engine.random.seed(7)
    np.testing.assert_array_equal(nd.random.uniform(shape=(5,)).asnumpy(), a)
    with pytest.raises(ValueError):
        engine.random.seed("seven")


def test_broadcasting_arithmetic_and_comparisons():
    a = nd.array([[1, 2, 3], [4, 5, 6]])
    b = nd.array([10, 20, 30])
    np.testing.assert_allclose((a + b).asnumpy(), [[11, 22, 33], [14, 25, 36]])
    np.testing.assert_allclose((2 - a).asnumpy()[0], [1, 0, -1])
    np.testing.assert_allclose((a / 2).asnumpy()[1], [2, 2.5, 3])
    np.testing.assert_allclose((a**2).asnumpy()[0], [1, 4, 9])
    eq = a > 3
    assert eq.dtype == np.float32
    np.testing.assert_allclose(eq.asnumpy(), [[0, 0, 0], [1, 1, 1]])
    assert (a * np.float32(2)).dtype == np.float32


def test_reductions_and_argmax():
    a = nd.array([[1, 5, 3], [4, 2, 6]])
    assert a.sum().asscalar() == 21
    np.testing.assert_allclose(nd.sum(a, axis=0).asnumpy(), [5, 7, 9])
    np.testing.assert_allclose(a.mean(axis=1, keepdims=True).asnumpy(), [[3], [4]])
    np.testing.assert_allclose(nd.max(a, axis=1).asnumpy(), [5, 6])
    np.testing.assert_allclose(nd.argmax(a, axis=1).asnumpy(), [1, 2])
    np.testing.assert_allclose(nd.sum(a, axis=1, exclude=True).asnumpy(), [5, 7, 9])
    assert abs(nd.norm(nd.array([3, 4])).asscalar() - 5) < 1e-6


def test_shape_ops_follow_mxnet_codes():
    a = nd.arange(24).reshape((2, 3, 4))
    assert a.reshape((0, -1)).shape == (2, 12)
    assert a.reshape(-1, 4).shape == (6, 4)
    assert a.transpose().shape == (4, 3, 2)
    assert a.T.shape == (4, 3, 2)
    assert nd.expand_dims(a, 1).shape == (2, 1, 3, 4)
    assert nd.flatten(a).shape == (2, 12)
    assert nd.concat(a, a, dim=2).shape == (2, 3, 8)
    assert nd.stack(a, a, axis=1).shape == (2, 2, 3, 4)
    assert nd.concat([a, a], axis=2).shape == (2, 3, 8)
    assert nd.stack([a, a]).shape == (2, 2, 3, 4)
    parts = nd.split(a, 3, axis=1)
    assert len(parts) == 3 and parts[0].shape == (2, 1, 4)
    with pytest.raises(ValueError, match="cannot reshape"):
        a.reshape((5, 5))


def test_indexing_reads_views_and_setitem_writes_in_place():
    a = nd.arange(12).reshape((3, 4))
    np.testing.assert_allclose(a[1].asnumpy(), [4, 5, 6, 7])
    np.testing.assert_allclose(a[:, 1].asnumpy(), [1, 5, 9])
    np.testing.assert_allclose(a[nd.array([0, 2])].asnumpy()[:, 0], [0, 8])
    a[0, :] = 100
    a[1] = nd.array([1, 1, 1, 1])
    np.testing.assert_allclose(a.asnumpy()[:2], [[100] * 4, [1] * 4])
    np.testing.assert_allclose(nd.pick(a, nd.array([0, 1, 2]), axis=1).asnumpy(), [100, 1, 10])


def test_dot_shape_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(4, 5\)"):
        nd.dot(nd.ones((2, 3)), nd.ones((4, 5)))
    np.testing.assert_allclose(
        nd.dot(nd.ones((2, 3)), nd.ones((2, 4)), transpose_a=True).asnumpy(), np.full((3, 4), 2)
    )


def test_fully_connected_rejects_wrong_feature_count():
    with pytest.raises(ValueError, match="7 features"):
        nd.FullyConnected(nd.ones((2, 7)), nd.ones((4, 3)), nd.zeros((4,)), num_hidden=4)


def test_copy_context_and_conversions():
    a = nd.array([1.5, 2.5])
    b = a.copy()
    b[0] = 0
    assert a[0].asscalar() == 1.5
    c = a.as_in_context(engine.cpu(1))
    assert c.context == engine.cpu(1) and a.context == engine.cpu(0)
    assert a.astype("int32").dtype == np.int32
    assert float(nd.array([3.0])) == 3.0
    assert "NDArray 2 @cpu(0)" in repr(a)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(a)


def test_save_and_load_never_pickle(tmp_path):
    path = tmp_path / "weights.params"  # MXNet-style name: kept as given
    nd.save(str(path), {"w": nd.ones((2, 2)), "b": nd.zeros((2,))})
    loaded = nd.load(str(path))
    assert set(loaded) == {"w", "b"}
    nd.save(str(path), [nd.ones((1,)), nd.zeros((3,))])
    as_list = nd.load(str(path))
    assert [x.shape for x in as_list] == [(1,), (3,)]
    evil = tmp_path / "evil.npz"
    np.savez(evil, w=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="pickle"):
        nd.load(str(evil))
