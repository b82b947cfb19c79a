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
