"""The public namespaces MXNet 1.9.1 code imports: ``engine.nd``'s explicit ``__all__``,
``mx.util``/``mx.np_shape``, ``mx.test_utils`` and ``mx.random``."""

from __future__ import annotations

import numpy as np
import pytest

import engine as mx
from engine import nd
from tests.oracle import needs_mxnet, run_mxnet


def test_nd_exports_only_its_api() -> None:
    for internal in ("Any", "annotations", "apply_op", "accepting_out", "builtins"):
        assert internal not in nd.__all__
    missing = [name for name in nd.__all__ if not hasattr(nd, name)]
    assert missing == []
    assert len(nd.__all__) == len(set(nd.__all__))


def test_np_shape_scope_and_decorators() -> None:
    assert not mx.util.is_np_shape()
    with mx.np_shape(True):
        assert mx.util.is_np_shape()
        with mx.np_shape(False):
            assert not mx.util.is_np_shape()
        assert mx.util.is_np_shape()
    assert not mx.util.is_np_shape()

    @mx.util.use_np
    def inside() -> tuple[bool, bool]:
        return mx.util.is_np_shape(), mx.util.is_np_array()

    assert inside() == (True, True)
    assert (mx.util.is_np_shape(), mx.util.is_np_array()) == (False, False)
    assert mx.util.set_np_shape(True) is False
    assert mx.util.set_np_shape(False) is True


def test_test_utils_helpers() -> None:
    tu = mx.test_utils
    tu.assert_almost_equal(nd.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-7]))
    with pytest.raises(AssertionError):
        tu.assert_almost_equal(nd.array([1.0]), np.array([1.1]))
    assert tu.same(nd.array([1, 2]), np.array([1.0, 2.0]))
    assert not tu.same(nd.array([1, 2]), np.array([1.0, 3.0]))
    assert tu.almost_equal(np.array([1.0]), np.array([1.0 + 1e-9]))
    arr = tu.rand_ndarray((3, 4))
    assert arr.shape == (3, 4) and arr.dtype == np.float32 and arr.stype == "default"
    assert ((arr.asnumpy() >= 0) & (arr.asnumpy() < 1)).all()
    with pytest.raises(NotImplementedError):
        tu.rand_ndarray((2, 2), stype="csr")
    assert tu.default_context() == mx.current_context()
    assert len(tu.rand_shape_nd(3)) == 3 and all(1 <= n <= 10 for n in tu.rand_shape_2d())
    tu.assert_exception(lambda: 1 / 0, ZeroDivisionError)
    with pytest.raises(AssertionError):
        tu.assert_exception(lambda: None, ZeroDivisionError)


@needs_mxnet
def test_random_and_autograd_names_match_mxnet() -> None:
    theirs = run_mxnet("""
import types
for name in ('random', 'autograd', 'runtime', 'util'):
    mod = getattr(mx, name)
    result[name] = sorted(n for n in dir(mod) if not n.startswith('_')
                          and callable(getattr(mod, n))
                          and not isinstance(getattr(mod, n), types.ModuleType)
                          and getattr(getattr(mod, n), '__module__', '').startswith('mxnet'))
""").json
    # ctypes plumbing of MXNet's C API (no counterpart in a pure-Python engine)
    c_api = {"check_call", "c_str", "c_array", "c_array_buf", "c_handle_array",
             "get_cuda_compute_capability", "get_gpu_count", "get_gpu_memory", "set_module",
             "np_ufunc_legal_option", "wrap_np_binary_func", "wrap_np_unary_func",
             "MXCallbackList", "Symbol", "get_symbol", "Context"}
    for name in ("random", "autograd", "runtime", "util"):
        module = getattr(mx, name)
        missing = [n for n in theirs[name] if n not in c_api and not hasattr(module, n)]
        assert missing == [], name


def test_test_utils_optimizer_and_environment_helpers() -> None:
    import os

    tu = mx.test_utils
    tu.compare_optimizer(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9),
                         mx.optimizer.SGD(learning_rate=0.1, momentum=0.9), (3, 4), np.float32)
    tu.compare_optimizer(mx.optimizer.Adam(), mx.optimizer.Adam(), [(2, 3), (4,)], np.float32,
                         ntensors=2)
    with pytest.raises(AssertionError):
        tu.compare_optimizer(mx.optimizer.SGD(learning_rate=0.1),
                             mx.optimizer.SGD(learning_rate=0.2), (3, 4), np.float32)
    os.environ.pop("RUDDER_TU_PROBE", None)
    with tu.environment("RUDDER_TU_PROBE", "1"):
        assert os.environ["RUDDER_TU_PROBE"] == "1"
        with tu.environment({"RUDDER_TU_PROBE": None}):
            assert "RUDDER_TU_PROBE" not in os.environ
        assert os.environ["RUDDER_TU_PROBE"] == "1"
    assert "RUDDER_TU_PROBE" not in os.environ
    data = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(tu.np_reduce(data, (0, 2), False, np.sum), data.sum((0, 2)))
    np.testing.assert_array_equal(tu.np_reduce(data, 1, True, np.max),
                                  data.max(1, keepdims=True))
    picks = tu.random_sample(range(10), 4)
    assert len(set(picks)) == 4 and all(0 <= p < 10 for p in picks)
    a = nd.array([1.0, 2.0])
    assert tu.same_array(a, a[:]) and not tu.same_array(a, a.copy())
    tu.assert_almost_equal_ignore_nan(nd.array([np.nan, 1.0]), np.array([5.0, 1.0]))
