# ruff: noqa: E501 - each case is one expression string shared verbatim with MXNet
"""Differential tests: ``mx.np`` functions give MXNet 1.9.1's values, dtypes and shapes, and
the differentiable ones its gradients.

Each expression is evaluated by both under ``npx.set_np()`` (how mx.np code runs): mx.np's
own dtype rules (Python lists become float32, numpy arrays keep their dtype, the mean of
integers is float32, so Gluon losses on integer arrays are float32), comparisons return bool
arrays, full reductions are 0-d.
"""

from __future__ import annotations

import numpy as np
import pytest

import engine as mx
from engine import autograd
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

_rng = np.random.default_rng(27)
INPUTS = {
    "a": _rng.uniform(-2, 2, (3, 4)).astype(np.float32),
    "b": _rng.uniform(0.5, 2, (3, 4)).astype(np.float32),
    "v": np.array([0.5, 1.5, 2.5, -0.5, 3.7], np.float32),
    "i": np.array([3, 4, 12, 5], np.int64),
    "spd": (lambda m: m @ m.T + 3 * np.eye(3))(_rng.uniform(-1, 1, (3, 3))).astype(np.float32),
}

VALUES = {
    "array_of_ints": "np.array([1, 2])",
    "array_of_bools": "np.array([True, False])",
    "array_of_numpy_ints": "np.array(inputs['i'])",
    "array_of_numpy_float64": "np.array(inputs['a'].astype('float64'))",
    "compare_operator": "np.array(inputs['a']) > 0",
    "equal": "np.equal(np.array(inputs['a']), np.array(inputs['a']))",
    "less_scalar": "np.less(np.array(inputs['v']), 1)",
    "isnan": "np.isnan(np.array(inputs['v']))",
    "logical_not": "np.logical_not(np.array(inputs['v']))",
    "round_half_even": "np.round(np.array(inputs['v']))",
    "around_decimals": "np.around(np.array(inputs['a']), 1)",
    "fix": "np.fix(np.array(inputs['v']))",
    "rint": "np.rint(np.array(inputs['v']))",
    "trunc": "np.trunc(np.array(inputs['v']))",
    "arctan2": "np.arctan2(np.array(inputs['a']), np.array(inputs['b']))",
    "hypot": "np.hypot(np.array(inputs['a']), np.array(inputs['b']))",
    "copysign": "np.copysign(np.array(inputs['b']), np.array(inputs['a']))",
    "ldexp": "np.ldexp(np.array(inputs['a']), np.array(inputs['b']))",
    "mod": "np.mod(np.array(inputs['a']), np.array(inputs['b']))",
    "remainder_scalar": "np.remainder(np.array(inputs['a']), 1.5)",
    "degrees": "np.degrees(np.array(inputs['a']))",
    "log2": "np.log2(np.array(inputs['b']))",
    "cbrt": "np.cbrt(np.array(inputs['a']))",
    "bitwise_and": "np.bitwise_and(np.array(inputs['i']), np.array(inputs['i'][::-1].copy()))",
    "invert": "np.invert(np.array(inputs['i']))",
    "lcm": "np.lcm(np.array(inputs['i']), np.array(inputs['i'][::-1].copy()))",
    "std": "np.std(np.array(inputs['a']))",
    "var_axis_ddof": "np.var(np.array(inputs['a']), axis=1, ddof=1)",
    "average_weights": "np.average(np.array(inputs['v']), weights=np.array([1., 1, 1, 1, 2]))",
    "amax_axis": "np.amax(np.array(inputs['a']), axis=0)",
    "all": "np.all(np.array(inputs['v']))",
    "any_axis": "np.any(np.array(inputs['a']) > 1, axis=1)",
    "cumsum": "np.cumsum(np.array(inputs['a']), axis=1)",
    "sort": "np.sort(np.array(inputs['a']), axis=1)",
    "argsort": "np.argsort(np.array(inputs['v']))",
    "unique": "np.unique(np.array([3., 1, 3, 2]))",
    "nonzero": "np.nonzero(np.array([0., 1, 0, 2]))[0]",
    "diff": "np.diff(np.array(inputs['a']), axis=1)",
    "ediff1d": "np.ediff1d(np.array(inputs['v']))",
    "percentile": "np.percentile(np.array(inputs['v']), 40)",
    "quantile": "np.quantile(np.array(inputs['v']), 0.3)",
    "bincount": "np.bincount(np.array(inputs['i']))",
    "trace": "np.trace(np.array(inputs['a']))",
    "einsum": "np.einsum('ij,kj->ik', np.array(inputs['a']), np.array(inputs['b']))",
    "tensordot": "np.tensordot(np.array(inputs['a']), np.array(inputs['b']).T, axes=1)",
    "inner": "np.inner(np.array(inputs['a']), np.array(inputs['b']))",
    "outer": "np.outer(np.array(inputs['v']), np.array(inputs['v']))",
    "vdot": "np.vdot(np.array(inputs['a']), np.array(inputs['b']))",
    "polyval": "np.polyval(np.array([1., -2, 3]), np.array(inputs['v']))",
    "flip": "np.flip(np.array(inputs['a']), axis=1)",
    "fliplr": "np.fliplr(np.array(inputs['a']))",
    "roll": "np.roll(np.array(inputs['a']), 2, axis=1)",
    "rot90": "np.rot90(np.array(inputs['a']))",
    "ravel": "np.ravel(np.array(inputs['a']))",
    "tril": "np.tril(np.array(inputs['a']), -1)",
    "diag": "np.diag(np.array(inputs['v']))",
    "diagonal": "np.diagonal(np.array(inputs['a']))",
    "diagflat": "np.diagflat(np.array(inputs['v'][:3].copy()))",
    "resize": "np.resize(np.array(inputs['v']), (2, 4))",
    "delete": "np.delete(np.array(inputs['v']), 1)",
    "insert": "np.insert(np.array(inputs['v']), 1, 5.0)",
    "append": "np.append(np.array(inputs['v']), np.array([7., 8]))",
    "hstack": "np.hstack([np.array(inputs['a']), np.array(inputs['b'])])",
    "vstack": "np.vstack([np.array(inputs['v']), np.array(inputs['v'])])",
    "dstack": "np.dstack([np.array(inputs['v']), np.array(inputs['v'])])",
    "column_stack": "np.column_stack([np.array(inputs['v']), np.array(inputs['v'])])",
    "array_split_first": "np.array_split(np.array(inputs['v']), 3)[0]",
    "hsplit_second": "np.hsplit(np.array(inputs['a']), 2)[1]",
    "atleast_3d": "np.atleast_3d(np.array(inputs['v']))",
    "moveaxis": "np.moveaxis(np.array(inputs['a']), 0, 1)",
    "take": "np.take(np.array(inputs['a']), np.array([0, 2], dtype='int64'), axis=1)",
    "meshgrid_first": "np.meshgrid(np.array(inputs['v']), np.array([1., 2, 3]))[0]",
    "broadcast_arrays_second": "np.broadcast_arrays(np.array(inputs['v']), np.ones((2, 1)))[1]",
    "identity": "np.identity(3)",
    "empty_like_shape": "np.zeros_like(np.empty_like(np.array(inputs['i'])))",
    "logspace": "np.logspace(0, 2, 5)",
    "hanning": "np.hanning(5)",
    "nan_to_num": "np.nan_to_num(np.array([float('nan'), float('inf'), 1.0]))",
    "linalg_inv": "np.linalg.inv(np.array(inputs['spd']))",
    "linalg_det": "np.linalg.det(np.array(inputs['spd']))",
    "linalg_slogdet_log": "np.linalg.slogdet(np.array(inputs['spd']))[1]",
    "linalg_solve": "np.linalg.solve(np.array(inputs['spd']), np.array(inputs['v'][:3].copy()))",
    "linalg_cholesky": "np.linalg.cholesky(np.array(inputs['spd']))",
    "linalg_norm": "np.linalg.norm(np.array(inputs['a']))",
    "linalg_norm_vector_1": "np.linalg.norm(np.array(inputs['v']), 1)",
    "linalg_eigvalsh": "np.linalg.eigvalsh(np.array(inputs['spd']))",
    "linalg_pinv": "np.linalg.pinv(np.array(inputs['a']))",
    "linalg_tensorinv": "np.linalg.tensorinv(np.array(inputs['spd']).reshape(3, 3), ind=1)",
    "npx_reshape_codes": "npx.reshape(np.ones((8, 3, 3, 3, 4, 4)), (-6, 2, -1, -4))",
    "npx_reshape_reverse": "npx.reshape(np.ones((8, 3, 2, 4, 8)), (-4, -1, 2, -6), reverse=True)",
    "npx_nonzero": "npx.nonzero(np.array([[0., 1], [2, 0]]))",
    "npx_arange_like_axis": "npx.arange_like(np.ones((2, 3)), axis=1)",
    # integers promote to float32 where mx.np averages, so Gluon losses on them do too
    "mean_of_ints": "np.mean(np.array(inputs['i']))",
    "mean_of_bools": "np.mean(np.array(inputs['i']) > 4)",
    "mean_method_of_ints": "np.array(inputs['i']).mean()",
    "mean_of_ints_as_float64": "np.mean(np.array(inputs['i']), dtype='float64')",
    "l1_loss_on_ints": "gluon.loss.L1Loss()(np.array(inputs['i']), np.array(inputs['i'][::-1].copy()))",
    "l2_loss_on_ints": "gluon.loss.L2Loss()(np.array(inputs['i']), np.array(inputs['i'][::-1].copy()))",
    "l1_loss_on_int_lists": "gluon.loss.L1Loss()(np.array([1, 2, 3, 4]), np.array([1, 3, 5, 7]))",
}

# expression over y (inputs['a'] with a gradient attached) -> y's gradient
GRADIENTS = {
    "roll": "np.roll(y, 1, axis=1) * np.array(inputs['b'])",
    "flip": "np.flip(y, 0) * np.array(inputs['b'])",
    "tril": "np.tril(y) * 2",
    "diagonal": "np.diagonal(y) * 3",
    "rot90": "np.rot90(y) * np.array(inputs['b']).T",
    "resize": "np.resize(y, (5, 4))",
    "take": "np.take(y, np.array([0, 0, 3], dtype='int64'), axis=1)",
    "std": "np.std(y, axis=1)",
    "var": "np.var(y)",
    "average": "np.average(y, axis=0, weights=np.array([1., 2, 3]))",
    "einsum": "np.einsum('ij,ij->i', y, np.array(inputs['b']))",
    "tensordot": "np.tensordot(y, np.array(inputs['b']), axes=([1], [1]))",
    "outer": "np.outer(y[0], y[1])",
    "arctan2": "np.arctan2(y, np.array(inputs['b']))",
    "hypot": "np.hypot(y, np.array(inputs['b']))",
    "cumsum": "np.cumsum(y, axis=0)",
    "diff": "np.diff(y, axis=1)",
    "hstack": "np.hstack([y, y * 2])",
    "insert": "np.insert(y[0], 2, 9.0)",
    "polyval": "np.polyval(np.array([1., -2, 3]), y)",
    "linalg_norm": "np.linalg.norm(y)",
}
SPD_GRADIENTS = {
    "linalg_inv": "np.linalg.inv(y)",
    "linalg_det": "np.linalg.det(y)",
    "linalg_slogdet": "np.linalg.slogdet(y)[1]",
    "linalg_solve": "np.linalg.solve(y, np.array(inputs['v'][:3].copy()))",
}

# MXNet 1.9.1's gradients of these are wrong (zeros for var, std and polyval's x; rot90's
# rotated the wrong way): the engine's are checked against finite differences instead
MXNET_WRONG_GRADIENTS = ("polyval", "rot90", "std", "var")

SNIPPET = f"""
import numpy as onp
from mxnet import np, npx
result['types'] = {{name: onp.dtype(getattr(np, name)).name for name in dir(np)
                   if isinstance(getattr(np, name), type) and (
                       issubclass(getattr(np, name), onp.generic) or getattr(np, name) is bool)}}
npx.set_np()
for name, expr in {VALUES!r}.items():
    try:
        value = eval(expr)
        outputs[name] = value.asnumpy()
        result[name] = [list(value.shape), onp.dtype(value.dtype).name]
    except Exception as err:
        result[name] = 'error:' + type(err).__name__
for cases, source in [({GRADIENTS!r}, 'a'), ({SPD_GRADIENTS!r}, 'spd')]:
    for name, expr in cases.items():
        y = np.array(inputs[source])
        y.attach_grad()
        try:
            with autograd.record():
                out = eval(expr)
            out.backward()
            outputs['grad_' + name] = y.grad.asnumpy()
        except Exception as err:  # numpy fallbacks have no gradient in MXNet
            result['grad_' + name] = 'error:' + type(err).__name__
"""


@pytest.fixture(scope="module")
def mxnet():
    return run_mxnet(SNIPPET, INPUTS)


@pytest.fixture
def np_mode():
    mx.npx.set_np()
    yield
    mx.npx.reset_np()


def _eval(expr: str, **names):
    scope = {"np": mx.np, "npx": mx.npx, "gluon": mx.gluon, "inputs": INPUTS, **names}
    return eval(expr, scope)  # noqa: S307 - this module's fixed expressions


@pytest.mark.parametrize("name", sorted(VALUES))
def test_np_function_matches_mxnet(mxnet, np_mode, name: str) -> None:
    expected = mxnet.json[name]
    assert not isinstance(expected, str), f"MXNet failed on {name}: {expected}"
    value = _eval(VALUES[name])
    assert [list(value.shape), np.dtype(value.dtype).name] == expected, name
    np.testing.assert_allclose(value.asnumpy(), mxnet[name], rtol=2e-5, atol=2e-5)


def _gradient(expr: str, point: np.ndarray) -> np.ndarray:
    y = mx.np.array(point)
    y.attach_grad()
    with autograd.record():
        out = _eval(expr, y=y)
    out.backward()
    return y.grad.asnumpy()


def _finite_differences(expr: str, point: np.ndarray, step: float = 1e-3) -> np.ndarray:
    grad = np.zeros(point.shape, np.float64)
    for index in np.ndindex(point.shape):
        hi, lo = point.astype(np.float64), point.astype(np.float64)
        hi[index] += step
        lo[index] -= step
        up = _eval(expr, y=mx.np.array(hi)).asnumpy().astype(np.float64).sum()
        down = _eval(expr, y=mx.np.array(lo)).asnumpy().astype(np.float64).sum()
        grad[index] = (up - down) / (2 * step)
    return grad


@pytest.mark.parametrize("name, source", [(n, "a") for n in sorted(GRADIENTS)]
                         + [(n, "spd") for n in sorted(SPD_GRADIENTS)])
def test_np_gradient_matches_mxnet(mxnet, np_mode, name: str, source: str) -> None:
    expr = {**GRADIENTS, **SPD_GRADIENTS}[name]
    got = _gradient(expr, INPUTS[source])
    if name in MXNET_WRONG_GRADIENTS or "grad_" + name in mxnet.json:
        # MXNet's is wrong, or MXNet has none (its numpy fallbacks do not differentiate)
        if name in MXNET_WRONG_GRADIENTS:
            assert not np.allclose(got, mxnet["grad_" + name], rtol=1e-4, atol=1e-4)
        expected = _finite_differences(expr, INPUTS[source].astype(np.float64))
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3)
    else:
        np.testing.assert_allclose(got, mxnet["grad_" + name], rtol=1e-4, atol=1e-4)


def test_np_dtype_names_are_mxnet_s(mxnet) -> None:
    """``mx.np.bool``, ``mx.np.float32``, ... name the same numpy types as in MXNet."""
    assert "bool" in mxnet.json["types"]
    missing = sorted(set(mxnet.json["types"]) - set(dir(mx.np)))
    assert not missing, f"mx.np lacks MXNet's type names {missing}"
    ours = {name: np.dtype(getattr(mx.np, name)).name for name in mxnet.json["types"]}
    assert ours == mxnet.json["types"]

