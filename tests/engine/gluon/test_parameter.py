"""Parameter and ParameterDict: initialization, deferred shapes, the in-place contract the
Trainer relies on, grad_req, contexts, save/load."""

import io

import numpy as np
import pytest

from engine import autograd, cpu, gluon, init, nd
from engine.gluon import Parameter, ParameterDict
from engine.gluon.parameter import DeferredInitializationError


def test_initialize_fills_with_the_parameter_init_and_allocates_a_gradient():
    p = Parameter("fc_weight", shape=(2, 3), init=init.Constant(0.5))
    p.initialize(default_init=init.One())  # the parameter's own init beats the default
    np.testing.assert_array_equal(p.data().asnumpy(), np.full((2, 3), 0.5, np.float32))
    q = Parameter("fc_bias", shape=(2,), init=init.Constant(0.5))
    q.initialize(init=init.One())  # an explicit init beats both (MXNet)
    np.testing.assert_array_equal(q.data().asnumpy(), [1, 1])
    assert p.data().dtype == np.float32
    np.testing.assert_array_equal(p.grad().asnumpy(), np.zeros((2, 3)))
    assert p.list_ctx() == [cpu(0)]


def test_uninitialized_and_deferred_errors_name_the_parameter():
    p = Parameter("w", shape=(2, 2))
    with pytest.raises(RuntimeError, match="Parameter 'w' has not been initialized"):
        p.data()
    q = Parameter("q", shape=(0, 3), allow_deferred_init=True)
    q.initialize()
    with pytest.raises(DeferredInitializationError, match="'q' has not been initialized yet"):
        q.data()
    with pytest.raises(ValueError, match="invalid shape"):
        Parameter("r", shape=(0, 3)).initialize()


def test_deferred_shape_is_completed_and_checked():
    p = Parameter("w", shape=(4, 0), allow_deferred_init=True, init="ones")
    p.initialize()
    with pytest.raises(ValueError, match="incompatible"):
        p.shape = (5, 3)
    p.shape = (4, 3)
    p._finish_deferred_init()
    np.testing.assert_array_equal(p.data().asnumpy(), np.ones((4, 3)))


def test_set_data_and_reinit_write_into_the_same_buffers():
    p = Parameter("w", shape=(2, 2), init="zeros")
    p.initialize(ctx=[cpu(0), cpu(1)])
    arrays, grads = p.list_data(), p.list_grad()
    # the Trainer swaps .raw for a view into a flat buffer; later writes must land there
    flat = np.zeros(8, np.float32)
    arrays[0].raw = flat[:4].reshape(2, 2)
    p.set_data(nd.array([[1, 2], [3, 4]]))
    np.testing.assert_array_equal(flat[:4], [1, 2, 3, 4])
    np.testing.assert_array_equal(p.data(cpu(1)).asnumpy(), [[1, 2], [3, 4]])
    p.initialize(init=init.One(), force_reinit=True)
    np.testing.assert_array_equal(flat[:4], [1, 1, 1, 1])
    assert p.list_data()[0] is arrays[0] and p.list_grad()[1] is grads[1]


def test_grad_req_null_and_back_keeps_gradient_objects():
    p = Parameter("w", shape=(3,), init="ones")
    p.initialize()
    grad = p.grad()
    p.grad_req = "null"
    with pytest.raises(RuntimeError, match="grad_req='null'"):
        p.grad()
    x = nd.ones((3,))
    with autograd.record():
        y = (p.data() * x).sum() + (x * 1).sum()
    assert y.asscalar() == 6.0
    p.grad_req = "add"
    assert p.grad() is grad
    for _ in range(2):
        with autograd.record():
            loss = (p.data() * nd.array([1, 2, 3])).sum()
        loss.backward()
    np.testing.assert_array_equal(grad.asnumpy(), [2, 4, 6])
    p.zero_grad()
    np.testing.assert_array_equal(grad.asnumpy(), [0, 0, 0])
    with pytest.raises(ValueError, match="grad_req"):
        p.grad_req = "sometimes"


def test_per_context_data_and_reset_ctx():
    p = Parameter("w", shape=(2,), init="ones")
    p.initialize(ctx=[cpu(0), cpu(1)])
    assert p.data(cpu(1)).context == cpu(1)
    assert [a.context for a in p.list_data()] == [cpu(0), cpu(1)]
    p.reset_ctx(cpu(2))
    assert p.list_ctx() == [cpu(2)]
    np.testing.assert_array_equal(p.data().asnumpy(), [1, 1])


def test_cast_keeps_the_ndarray_objects():
    p = Parameter("w", shape=(2,), init="ones")
    p.initialize()
    data = p.data()
    p.cast("float64")
    assert p.data() is data and data.dtype == np.float64 and p.grad().dtype == np.float64


def test_constant_is_not_trainable():
    c = gluon.Constant("c", [[1.0, 2.0]])
    c.initialize()
    np.testing.assert_array_equal(c.data().asnumpy(), [[1, 2]])
    assert c.grad_req == "null"
    with pytest.warns(UserWarning, match="does not support grad_req"):
        c.grad_req = "write"
    assert c.grad_req == "null"


def test_parameter_dict_get_update_setattr_and_select():
    pd = ParameterDict("net_")
    w = pd.get("weight", shape=(2, 0))
    assert pd.get("weight", shape=(2, 3)) is w and w.shape == (2, 3)
    with pytest.raises(AssertionError, match="desired attribute does not match"):
        pd.get("weight", shape=(4, 3))
    other = ParameterDict("x_")
    other.get("bias", shape=(2,))
    pd.update(other)
    assert list(pd.keys()) == ["net_weight", "x_bias"]
    clash = ParameterDict("net_")
    clash.get("weight", shape=(2, 3))
    with pytest.raises(AssertionError, match="same name 'net_weight'"):
        pd.update(clash)
    pd.setattr("lr_mult", 2)
    assert all(p.lr_mult == 2 for p in pd.values())
    assert list(pd.select(".*bias").keys()) == ["x_bias"]


def test_parameter_dict_save_load_round_trip_and_errors(tmp_path):
    pd = ParameterDict("net_")
    pd.get("weight", shape=(2, 2), init="ones")
    pd.get("bias", shape=(2,), init="zeros")
    pd.initialize()
    path = tmp_path / "p.params"
    pd.save(str(path), strip_prefix="net_")
    assert path.exists()  # the exact name, no '.npz' appended
    fresh = ParameterDict("net_")
    fresh.get("weight", shape=(2, 2))
    fresh.get("bias", shape=(2,))
    fresh.load(str(path), restore_prefix="net_")
    np.testing.assert_array_equal(fresh["net_weight"].data().asnumpy(), np.ones((2, 2)))
    bigger = ParameterDict("net_")
    bigger.get("weight", shape=(2, 2))
    bigger.get("bias", shape=(2,))
    bigger.get("gamma", shape=(2,))
    with pytest.raises(AssertionError, match="Parameter 'gamma' is missing"):
        bigger.load(str(path), restore_prefix="net_")
    smaller = ParameterDict("net_")
    smaller.get("weight", shape=(2, 2))
    with pytest.raises(ValueError, match="Parameter 'bias' loaded from .* is not present"):
        smaller.load(str(path), restore_prefix="net_")
    smaller.load(str(path), restore_prefix="net_", ignore_extra=True)
    wrong = ParameterDict("net_")
    wrong.get("weight", shape=(3, 2))
    with pytest.raises(ValueError, match="shape incompatible expected"):
        wrong.load(str(path), restore_prefix="net_", ignore_extra=True)


def test_parameter_file_refuses_pickle():
    import pickle

    buf = io.BytesIO()
    np.save(buf, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    buf.seek(0)
    pd = ParameterDict()
    with pytest.raises(ValueError, match="pickled"):
        pd.load(buf)
    with pytest.raises(ValueError, match="not an npz parameter archive"):
        pd.load(io.BytesIO(pickle.dumps({"w": [1, 2]})))


def test_data_on_a_context_it_was_not_initialized_on_is_an_error():
    p = Parameter("w", shape=(2,), init="ones")
    p.initialize(ctx=cpu(0))
    with pytest.raises(RuntimeError, match=r"not initialized on context cpu\(1\)"):
        p.data(cpu(1))
    net = gluon.nn.Dense(1, in_units=2)
    net.initialize(ctx=cpu(0))
    with pytest.raises(RuntimeError, match="only initialized on"):
        net(nd.ones((1, 2), ctx=cpu(1)))
