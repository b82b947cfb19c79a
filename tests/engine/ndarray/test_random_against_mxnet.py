"""``mx.random.*`` and the legacy ``nd.uniform``/``nd.random_*``/``nd.sample_*`` names: same
shapes, dtypes and distributions as MXNet 1.9.1 (the streams differ, so the distributions
are compared by their moments), and the engine's seed makes them reproducible."""

from __future__ import annotations

import numpy as np
import pytest

import engine as mx
from engine import nd
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

CALLS = {
    "top_uniform": "mx.random.uniform(0, 1, shape=(2,))",
    "top_normal": "mx.random.normal(1, 2, shape=(3, 2))",
    "top_randint": "mx.random.randint(0, 5, shape=(4,))",
    "top_exponential": "mx.random.exponential(2, shape=(5,))",
    "top_gamma": "mx.random.gamma(2, 3, shape=(2, 2))",
    "top_poisson": "mx.random.poisson(3, shape=(3,))",
    "top_negative_binomial": "mx.random.negative_binomial(3, 0.4, shape=(3,))",
    "top_gen_negative_binomial": "mx.random.generalized_negative_binomial(2, 0.5, shape=(3,))",
    "top_multinomial": "mx.random.multinomial(nd.array([[0.1, 0.9], [0.5, 0.5]]), shape=3)",
    "top_randn": "mx.random.randn(2, 3)",
    "top_shuffle": "mx.random.shuffle(nd.arange(6))",
    "nd_uniform": "nd.uniform(low=0, high=2, shape=(2, 3))",
    "nd_normal": "nd.normal(shape=(4,))",
    "nd_random_uniform": "nd.random_uniform(shape=(2,))",
    "nd_random_normal": "nd.random_normal(shape=(2,), dtype='float64')",
    "nd_sample_uniform": "nd.sample_uniform(nd.array([0, 10]), nd.array([1, 11]), shape=(3,))",
    "nd_sample_normal": "nd.sample_normal(nd.array([0, 10]), nd.array([1, 2]))",
    "per_element_uniform": "nd.random.uniform(nd.zeros((2, 2)), nd.ones((2, 2)), shape=(5,))",
    "uniform_like": "nd.random.uniform_like(nd.zeros((3, 2), dtype='float64'))",
    "normal_like": "nd.random.normal_like(nd.zeros((4,)))",
    "default_shape": "nd.random.uniform()",
}
MOMENTS = {
    "uniform": ("mx.random.uniform(2, 4, shape=(20000,))", 3.0, 1 / 3),
    "normal": ("mx.random.normal(1, 2, shape=(20000,))", 1.0, 4.0),
    "exponential": ("mx.random.exponential(2, shape=(20000,))", 2.0, 4.0),
    "gamma": ("mx.random.gamma(2, 3, shape=(20000,))", 6.0, 18.0),
    "poisson": ("mx.random.poisson(3, shape=(20000,))", 3.0, 3.0),
    "negative_binomial": ("mx.random.negative_binomial(3, 0.4, shape=(20000,))", 4.5, 11.25),
    "gen_negative_binomial": ("mx.random.generalized_negative_binomial(2, 0.5, shape=(20000,))",
                              2.0, 4.0),
}

SNIPPET = f"""
calls = {CALLS!r}
moments = {MOMENTS!r}
for name, expr in calls.items():
    value = eval(expr)
    result[name] = [list(value.shape), str(np.dtype(value.dtype))]
for name, (expr, _, _) in moments.items():
    sample = eval(expr).asnumpy().astype(np.float64)
    result['m_' + name] = [float(sample.mean()), float(sample.var())]
"""


@pytest.fixture(scope="module")
def oracle():
    return run_mxnet(SNIPPET)


def _engine(expr: str):
    # the expressions are this module's constants, shared verbatim with the MXNet snippet
    return eval(expr, {"nd": nd, "mx": mx, "np": np})  # noqa: S307


@pytest.mark.parametrize("name", sorted(CALLS))
def test_draw_has_mxnets_shape_and_dtype(oracle, name: str) -> None:
    value = _engine(CALLS[name])
    assert [list(value.shape), str(np.dtype(value.dtype))] == oracle.json[name]


@pytest.mark.parametrize("name", sorted(MOMENTS))
def test_distribution_matches_mxnets(oracle, name: str) -> None:
    expr, mean, var = MOMENTS[name]
    sample = _engine(expr).asnumpy().astype(np.float64)
    mx_mean, mx_var = oracle.json["m_" + name]
    for got, theirs, truth in ((sample.mean(), mx_mean, mean), (sample.var(), mx_var, var)):
        assert got == pytest.approx(truth, rel=0.06)
        assert theirs == pytest.approx(truth, rel=0.06)


def test_per_element_parameters_draw_within_each_range() -> None:
    draws = nd.sample_uniform(nd.array([0, 10]), nd.array([1, 11]), shape=(50,)).asnumpy()
    assert ((draws[0] >= 0) & (draws[0] < 1)).all() and ((draws[1] >= 10) & (draws[1] < 11)).all()


def test_multinomial_probabilities_and_log_prob() -> None:
    mx.random.seed(5)
    probs = nd.array([[0.0, 1.0], [1.0, 0.0]])
    picks, logp = mx.random.multinomial(probs, shape=4, get_prob=True)
    np.testing.assert_array_equal(picks.asnumpy(), [[1] * 4, [0] * 4])
    np.testing.assert_allclose(logp.asnumpy(), np.zeros((2, 4)))


def test_top_level_draws_follow_the_engine_seed() -> None:
    mx.random.seed(42)
    a = mx.random.uniform(0, 1, shape=(4,)).asnumpy()
    mx.random.seed(42)
    np.testing.assert_array_equal(nd.uniform(0, 1, shape=(4,)).asnumpy(), a)
    out = nd.zeros((4,))
    mx.random.seed(42)
    assert nd.random.uniform(0, 1, out=out) is out
    np.testing.assert_array_equal(out.asnumpy(), a)
