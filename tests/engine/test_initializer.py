"""Initializers: exact values and distributions from mxnet-semantics.md §4/§7, dispatch by
name and by Gluon's ``__init__`` attribute, registry, dumps, and user subclasses."""

import json

import numpy as np
import pytest

import engine
from engine import gluon, init, nd
from engine.initializer import InitDesc


def filled(initializer, shape, name="x_weight"):
    arr = nd.zeros(shape)
    initializer(InitDesc(name), arr)
    return arr.asnumpy()


def test_bilinear_4x4_is_the_outer_product():
    k = np.array([0.25, 0.75, 0.75, 0.25])
    np.testing.assert_allclose(filled(init.Bilinear(), (1, 1, 4, 4))[0, 0], np.outer(k, k))


@pytest.mark.parametrize("factor_type,fan", [("avg", (60 + 20 * 9) / 2), ("in", 60), ("out", 180)])
def test_xavier_uniform_bounds_and_gaussian_std(factor_type, fan):
    engine.random.seed(0)
    w = filled(init.Xavier(factor_type=factor_type, magnitude=3), (20, 60, 3, 3))
    fan_in, fan_out = 60 * 9, 20 * 9
    fan = {"avg": (fan_in + fan_out) / 2, "in": fan_in, "out": fan_out}[factor_type]
    bound = np.sqrt(3 / fan)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.98 * bound
    g = filled(init.Xavier(rnd_type="gaussian", factor_type=factor_type, magnitude=2),
               (64, 128))
    fan2 = {"avg": 96, "in": 128, "out": 64}[factor_type]
    assert g.std() == pytest.approx(np.sqrt(2 / fan2), rel=0.03)
    with pytest.raises(ValueError, match="Xavier initializer cannot be applied to vector"):
        filled(init.Xavier(), (5,))


def test_msra_prelu_is_gaussian_xavier_with_prelu_magnitude():
    engine.random.seed(1)
    w = filled(init.MSRAPrelu(factor_type="in", slope=0.25), (200, 300))
    assert w.std() == pytest.approx(np.sqrt(2 / (1 + 0.25**2) / 300), rel=0.02)
    assert init.MSRAPrelu().dumps() == '["msraprelu", {"factor_type": "avg", "slope": 0.25}]'


@pytest.mark.parametrize("shape", [(3, 8), (8, 3), (4, 2, 3)])
def test_orthogonal_rows_or_columns_are_orthonormal_times_scale(shape):
    for rand_type in ("uniform", "normal"):
        w = filled(init.Orthogonal(scale=1.5, rand_type=rand_type), shape).reshape(shape[0], -1)
        gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
        np.testing.assert_allclose(gram, 1.5**2 * np.eye(gram.shape[0]), atol=1e-5)


def test_uniform_normal_constant_zero_one():
    engine.random.seed(2)
    u = filled(init.Uniform(0.2), (1000,))
    assert u.min() >= -0.2 and u.max() <= 0.2 and u.std() == pytest.approx(0.2 / np.sqrt(3),
                                                                             rel=0.1)
    assert filled(init.Normal(0.5), (20000,)).std() == pytest.approx(0.5, rel=0.03)
    np.testing.assert_array_equal(filled(init.Constant(7), (2,)), [7, 7])
    np.testing.assert_array_equal(filled(init.Constant([1, 2]), (2, 2)), [[1, 2], [1, 2]])
    np.testing.assert_array_equal(filled(init.Zero(), (2,)), [0, 0])
    np.testing.assert_array_equal(filled(init.One(), (2,)), [1, 1])


def test_seed_makes_initialization_reproducible():
    engine.random.seed(5)
    a = filled(init.Xavier(), (4, 4))
    engine.random.seed(5)
    np.testing.assert_array_equal(a, filled(init.Xavier(), (4, 4)))


def test_dumps_and_create():
    assert init.Constant(1).dumps() == '["constant", {"value": 1}]'
    assert json.loads(init.Uniform(0.1).dumps()) == ["uniform", {"scale": 0.1}]
    assert isinstance(init.create("XAVIER", magnitude=2), init.Xavier)
    again = init.create(init.Xavier(rnd_type="gaussian").dumps())
    assert again.rnd_type == "gaussian"
    assert isinstance(init.create("zeros"), init.Zero)
    with pytest.raises(ValueError, match="unknown initializer 'glorot'"):
        init.create("glorot")


def test_legacy_name_dispatch():
    arr = nd.ones((3,))
    init.Uniform()("fc_bias", arr)
    np.testing.assert_array_equal(arr.asnumpy(), [0, 0, 0])
    init.Uniform()("bn_gamma", arr)
    np.testing.assert_array_equal(arr.asnumpy(), [1, 1, 1])
    init.Uniform()("bn_moving_mean", arr)
    np.testing.assert_array_equal(arr.asnumpy(), [0, 0, 0])
    init.Uniform()("bn_moving_var", arr)
    np.testing.assert_array_equal(arr.asnumpy(), [1, 1, 1])
    with pytest.raises(ValueError, match='Unknown initialization pattern for fc_scale.*"weight"'):
        init.Uniform()("fc_scale", arr)
    # Gluon's __init__ attribute bypasses the name rules: a bias gets the weight init
    init.Uniform()(InitDesc("fc_bias", {"__init__": init.Constant(3).dumps()}), arr)
    np.testing.assert_array_equal(arr.asnumpy(), [3, 3, 3])


def test_gluon_layers_default_values():
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(3, in_units=2), gluon.nn.BatchNorm(in_channels=3), gluon.nn.PReLU())
    net.initialize(init.Xavier())
    np.testing.assert_array_equal(net[0].bias.data().asnumpy(), [0, 0, 0])
    np.testing.assert_array_equal(net[1].running_var.data().asnumpy(), [1, 1, 1])
    np.testing.assert_array_equal(net[1].running_mean.data().asnumpy(), [0, 0, 0])
    np.testing.assert_array_equal(net[1].gamma.data().asnumpy(), [1, 1, 1])
    np.testing.assert_array_equal(net[1].beta.data().asnumpy(), [0, 0, 0])
    np.testing.assert_allclose(net[2].alpha.data().asnumpy(), [0.25])


def test_user_initializer_overriding_init_weight():
    @init.register
    class HalfInit(init.Initializer):
        def _init_weight(self, name, arr):
            arr[:] = 0.5

    net = gluon.nn.Dense(2, in_units=3)
    net.initialize(HalfInit())
    np.testing.assert_array_equal(net.weight.data().asnumpy(), np.full((2, 3), 0.5))
    np.testing.assert_array_equal(net.bias.data().asnumpy(), [0, 0])  # bias_initializer zeros
    assert isinstance(init.create("halfinit"), HalfInit)
    with pytest.raises(ValueError, match="already registered"):
        init.register(type("HalfInit", (init.Initializer,), {}))
    p = gluon.Parameter("custom_scale", shape=(2,), init=HalfInit())
    p.initialize()
    np.testing.assert_array_equal(p.data().asnumpy(), [0.5, 0.5])


def test_load_and_mixed():
    saved = {"arg:fc_weight": nd.ones((2, 2)), "fc_bias": nd.array([1.0, 2.0])}
    loader = init.Load(saved, default_init=init.Constant(9))
    w, b, other = nd.zeros((2, 2)), nd.zeros((2,)), nd.zeros((1,))
    loader("fc_weight", w)
    loader("fc_bias", b)
    loader("other_weight", other)
    np.testing.assert_array_equal(w.asnumpy(), np.ones((2, 2)))
    np.testing.assert_array_equal(b.asnumpy(), [1, 2])
    np.testing.assert_array_equal(other.asnumpy(), [9])
    with pytest.raises(AssertionError, match="Shape mismatch, target"):
        loader("fc_bias", nd.zeros((3,)))
    with pytest.raises(AssertionError, match="no default Initializer"):
        init.Load(saved)("missing_weight", nd.zeros((1,)))
    mixed = init.Mixed([".*bias", ".*weight"], [init.Zero(), init.One()])
    arr = nd.ones((2,))
    mixed("fc_bias", arr)
    np.testing.assert_array_equal(arr.asnumpy(), [0, 0])
    with pytest.raises(ValueError, match=r"Parameter name fc_gamma did not match any pattern"):
        mixed("fc_gamma", arr)


def test_lstm_bias_and_fused_rnn():
    bias = nd.ones((12,))
    init.Uniform()(InitDesc("lstm_i2h_bias", {"__init__": init.LSTMBias(forget_bias=2.0)}), bias)
    np.testing.assert_array_equal(bias.asnumpy(), [0] * 3 + [2] * 3 + [0] * 6)
    hidden, inputs = 2, 3
    size = 4 * hidden * (inputs + hidden + 2)
    fused = nd.zeros((size,))
    fused_init = init.FusedRNN(init.Constant(0.5), hidden, 1, "lstm", forget_bias=1.5)
    init.Uniform()(InitDesc("rnn_parameters", {"__init__": fused_init}), fused)
    values = fused.asnumpy()
    n_weights = 4 * hidden * (inputs + hidden)
    weights, biases = values[:n_weights], values[n_weights:]
    assert np.all(weights == 0.5)
    # i2h and h2h biases, gates i, f, c, o: forget gate biases get forget_bias
    np.testing.assert_array_equal(biases.reshape(2, 4, hidden)[:, 1], 1.5)
    np.testing.assert_array_equal(biases.reshape(2, 4, hidden)[:, [0, 2, 3]], 0.0)
    with pytest.raises(ValueError, match="does not fit"):
        init.FusedRNN(None, 4, 1, "lstm")._init_weight(InitDesc("p"), nd.zeros((7,)))


# ------------------------------------------------- equality and dumps, against MXNet 1.9.1
_INIT_SNIPPET = """
result['eq_constant'] = mx.init.Constant(-10.) == mx.init.Constant(-10.)
result['ne_constant'] = mx.init.Constant(-10.) == mx.init.Constant(-9.)
result['ne_kind'] = mx.init.Uniform(0.1) == mx.init.Normal(0.1)
result['eq_xavier'] = mx.init.Xavier(magnitude=2) == mx.init.Xavier(magnitude=2)
result['hashable'] = mx.init.Constant.__hash__ is not None
result['dumps_array'] = mx.init.Constant(nd.array([[1, 2], [3, 4]])).dumps()
result['dumps_scalar'] = mx.init.Constant(3.0).dumps()
result['dumps_uniform'] = mx.init.Uniform(0.1).dumps()
"""


def test_initializers_compare_and_dump_like_mxnet() -> None:
    from tests.oracle import run_mxnet

    theirs = run_mxnet(_INIT_SNIPPET).json
    assert (init.Constant(-10.0) == init.Constant(-10.0)) is theirs["eq_constant"] is True
    assert (init.Constant(-10.0) == init.Constant(-9.0)) is theirs["ne_constant"]
    assert (init.Uniform(0.1) == init.Normal(0.1)) is theirs["ne_kind"]
    assert (init.Xavier(magnitude=2) == init.Xavier(magnitude=2)) is theirs["eq_xavier"]
    assert (init.Constant.__hash__ is not None) is theirs["hashable"]
    assert init.Constant(nd.array([[1, 2], [3, 4]])).dumps() == theirs["dumps_array"]
    assert init.Constant(3.0).dumps() == theirs["dumps_scalar"]
    assert init.Uniform(0.1).dumps() == theirs["dumps_uniform"]
    for value in (nd.ones((2, 3)), np.ones((3,)), 1):
        const = init.Constant(value)
        assert const.dumps() == json.dumps([type(const).__name__.lower(), const._kwargs])
    # arrays compare by value (MXNet itself raises on multi-element arrays here)
    assert init.Constant(nd.array([1, 2])) == init.Constant(nd.array([1, 2]))
    assert init.Constant(nd.array([1, 2])) != init.Constant(nd.array([1, 3]))


def test_shared_parameter_with_an_equal_custom_init_is_accepted() -> None:
    a = gluon.Parameter("w", shape=(2,), init=init.Constant(-10.0))
    b = gluon.Parameter("w", shape=(2,), init=init.Constant(-10.0))
    assert a.init == b.init
    a.initialize()
    np.testing.assert_array_equal(a.data().asnumpy(), [-10.0, -10.0])


def test_legacy_initializer_hooks_match_mxnet() -> None:
    from tests.oracle import run_mxnet

    theirs = run_mxnet("""
a = nd.zeros((6,)); mx.init.Uniform()._init_loc_bias(None, a); outputs['loc'] = a
b = nd.zeros((1, 1, 4, 4)); mx.init.Uniform()._init_bilinear(None, b); outputs['bilinear'] = b
i = mx.init.Uniform(); result['chained'] = i.set_verbosity(True) is i
""")
    loc = nd.zeros((6,))
    init.Uniform()._init_loc_bias(None, loc)
    np.testing.assert_array_equal(loc.asnumpy(), theirs["loc"])
    bilinear = nd.zeros((1, 1, 4, 4))
    init.Uniform()._init_bilinear(None, bilinear)
    np.testing.assert_allclose(bilinear.asnumpy(), theirs["bilinear"], rtol=1e-6)
    uniform = init.Uniform()
    assert (uniform.set_verbosity(True) is uniform) == theirs.json["chained"]
