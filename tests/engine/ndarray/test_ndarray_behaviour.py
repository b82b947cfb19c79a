"""Differential tests of NDArray behaviours MXNet 1.9.1 code relies on: ``out=``, fluent
methods, dtype rules, truthiness, numpy interop, writes under autograd, and error types."""

from __future__ import annotations

import numpy as np
import pytest

import engine as mx
from engine import autograd, nd
from engine.base import MXNetError
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

SNIPPET = """
import json
def kind(f):
    try:
        v = f()
        return type(v).__name__ + ':' + str(getattr(v, 'dtype', ''))
    except Exception as err:
        return 'raises:' + ','.join(c.__name__ for c in type(err).__mro__)
result['methods'] = sorted(n for n in dir(nd.NDArray) if not n.startswith('_'))
o = nd.zeros((2, 2))
result['ones_out_is_out'] = nd.ones((2, 2), out=o) is o
outputs['ones_out'] = o
o2 = nd.zeros((3,))
nd.full((3,), 7, out=o2); outputs['full_out'] = o2
o3 = nd.ones((3,))
nd.zeros((3,), out=o3); outputs['zeros_out'] = o3
o4 = nd.zeros((3,))
r = nd.square(nd.array([1, 2, 3]), out=o4); result['square_out_is_out'] = r is o4
outputs['square_out'] = o4
o5 = nd.zeros((3,))
nd.clip(nd.array([-2, 0.5, 9]), 0, 1, out=o5); outputs['clip_out'] = o5
o6 = nd.zeros((2, 3))
nd.dot(nd.ones((2, 4)), nd.ones((4, 3)), out=o6); outputs['dot_out'] = o6
o7 = nd.zeros((2,))
nd.elemwise_add(nd.ones((2,)), nd.ones((2,)), out=o7); outputs['add_out'] = o7
result['out_wrong_shape'] = kind(lambda: nd.ones((3,), out=nd.zeros((2,))))
result['asscalar'] = kind(lambda: nd.array([1.5]).asscalar())
result['asscalar_int'] = kind(lambda: nd.array([3], dtype='int32').asscalar())
result['np_argmax'] = kind(lambda: np.argmax(nd.array([[1, 2], [4, 3]]), axis=1))
outputs['np_argmax'] = np.argmax(nd.array([[1, 2], [4, 3]]), axis=1)
result['np_sum'] = kind(lambda: np.sum(nd.array([[1, 2], [4, 3]])))
result['bool_empty'] = bool(nd.array([]))
result['bool_one'] = bool(nd.array([2]))
result['bool_zero'] = bool(nd.array([0]))
result['bool_two'] = kind(lambda: bool(nd.array([1, 2])))
b = nd.zeros((2, 3))
b[0] = np.array([5], np.float32)
b[1, 1] = np.array([4], np.float32)
outputs['setitem_np'] = b
def write_in_record():
    a = nd.ones((3,)); a.attach_grad()
    with autograd.record():
        y = a * 2
        y[0] = 5
result['setitem_record'] = kind(write_in_record)
def write_plain_in_record():
    c = nd.ones((3,))
    with autograd.record():
        c[0] = 5
    return c
outputs['setitem_record_plain'] = write_plain_in_record()
result['tostype'] = kind(lambda: nd.ones((2,)).tostype('default'))
outputs['tostype'] = nd.array([1, 2]).tostype('default')
result['version'] = mx.__version__
result['mxnet_error_mro'] = [c.__name__ for c in mx.base.MXNetError.__mro__]
result['dot_mismatch'] = kind(lambda: nd.dot(nd.ones((2, 3)), nd.ones((2, 3))))
result['features_cuda'] = mx.runtime.Features().is_enabled('CUDA')
result['features_unknown'] = kind(lambda: mx.runtime.Features().is_enabled('NOPE'))
src = np.array([[1, 2], [3, 4]], dtype='float32')
shared = nd.from_numpy(src)
shared[1, 1] = 100
outputs['from_numpy_src'] = src
result['from_numpy_src_write'] = kind(lambda: src.__setitem__((0, 0), 5))
result['from_numpy_noncontig'] = kind(lambda: nd.from_numpy(np.ones((2, 3)).T))
result['from_numpy_dtype'] = str(np.dtype(nd.from_numpy(np.arange(3)).dtype))
a = nd.array([[1, 2], [3, 4]])
outputs['dlpack_read'] = nd.from_dlpack(a.to_dlpack_for_read())
outputs['dlpack_write'] = nd.from_dlpack(nd.to_dlpack_for_write(a))
x = nd.array([np.nan, 1.0, -1.0]); x.attach_grad()
with autograd.record():
    y = nd.relu(x)
y.backward()
outputs['relu_nan_grad'] = x.grad
"""


@pytest.fixture(scope="module")
def oracle():
    return run_mxnet(SNIPPET)


def _kind(f) -> str:
    try:
        v = f()
        return type(v).__name__ + ":" + str(getattr(v, "dtype", ""))
    except Exception as err:  # noqa: BLE001 - the type is what is compared
        return "raises:" + ",".join(c.__name__ for c in type(err).__mro__)


def test_every_public_ndarray_method_of_mxnet_exists(oracle) -> None:
    missing = [m for m in oracle.json["methods"] if not hasattr(nd.NDArray, m)]
    assert missing == []


def test_fluent_methods_compute_like_their_operators() -> None:
    x = nd.array(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    np.testing.assert_array_equal(x.slice_axis(axis=1, begin=0, end=2).asnumpy(),
                                  x.asnumpy()[:, 0:2])
    np.testing.assert_array_equal(x.flip(axis=2).asnumpy(), x.asnumpy()[:, :, ::-1])
    np.testing.assert_array_equal(x.topk(k=1).asnumpy(), np.full((2, 3, 1), 3.0))
    assert x.writable


def test_out_argument_writes_into_the_given_array(oracle) -> None:
    o = nd.zeros((2, 2))
    assert (nd.ones((2, 2), out=o) is o) == oracle.json["ones_out_is_out"]
    np.testing.assert_array_equal(o.asnumpy(), oracle["ones_out"])
    o2 = nd.zeros((3,))
    nd.full((3,), 7, out=o2)
    np.testing.assert_array_equal(o2.asnumpy(), oracle["full_out"])
    o3 = nd.ones((3,))
    nd.zeros((3,), out=o3)
    np.testing.assert_array_equal(o3.asnumpy(), oracle["zeros_out"])
    o4 = nd.zeros((3,))
    assert (nd.square(nd.array([1, 2, 3]), out=o4) is o4) == oracle.json["square_out_is_out"]
    np.testing.assert_array_equal(o4.asnumpy(), oracle["square_out"])
    o5 = nd.zeros((3,))
    nd.clip(nd.array([-2, 0.5, 9]), 0, 1, out=o5)
    np.testing.assert_array_equal(o5.asnumpy(), oracle["clip_out"])
    o6 = nd.zeros((2, 3))
    nd.dot(nd.ones((2, 4)), nd.ones((4, 3)), out=o6)
    np.testing.assert_array_equal(o6.asnumpy(), oracle["dot_out"])
    o7 = nd.zeros((2,))
    nd.elemwise_add(nd.ones((2,)), nd.ones((2,)), out=o7)
    np.testing.assert_array_equal(o7.asnumpy(), oracle["add_out"])


def test_out_of_the_wrong_shape_raises_mxnet_error(oracle) -> None:
    assert "MXNetError" in oracle.json["out_wrong_shape"]
    with pytest.raises(MXNetError):
        nd.ones((3,), out=nd.zeros((2,)))


def test_asscalar_is_a_numpy_scalar_of_the_dtype(oracle) -> None:
    assert _kind(lambda: nd.array([1.5]).asscalar()) == oracle.json["asscalar"]
    assert _kind(lambda: nd.array([3], dtype="int32").asscalar()) == oracle.json["asscalar_int"]


def test_numpy_functions_on_an_ndarray_return_ndarrays(oracle) -> None:
    a = nd.array([[1, 2], [4, 3]])
    assert _kind(lambda: np.argmax(a, axis=1)) == oracle.json["np_argmax"]
    np.testing.assert_array_equal(np.argmax(a, axis=1).asnumpy(), oracle["np_argmax"])
    assert _kind(lambda: np.sum(a)) == oracle.json["np_sum"]


def test_truthiness_follows_mxnet(oracle) -> None:
    assert bool(nd.array([])) == oracle.json["bool_empty"]
    assert bool(nd.array([2])) == oracle.json["bool_one"]
    assert bool(nd.array([0])) == oracle.json["bool_zero"]
    assert "ValueError" in oracle.json["bool_two"]
    with pytest.raises(ValueError):
        bool(nd.array([1, 2]))


def test_setitem_takes_one_element_numpy_arrays(oracle) -> None:
    b = nd.zeros((2, 3))
    b[0] = np.array([5], np.float32)
    b[1, 1] = np.array([4], np.float32)
    np.testing.assert_array_equal(b.asnumpy(), oracle["setitem_np"])


def test_writing_a_recorded_array_raises_like_mxnet(oracle) -> None:
    assert "MXNetError" in oracle.json["setitem_record"]
    a = nd.ones((3,))
    a.attach_grad()
    with autograd.record():
        y = a * 2
        with pytest.raises(MXNetError):
            y[0] = 5
    c = nd.ones((3,))
    with autograd.record():
        c[0] = 5  # not part of a graph: allowed, as in MXNet
    np.testing.assert_array_equal(c.asnumpy(), oracle["setitem_record_plain"])


def test_tostype_default_copies(oracle) -> None:
    src = nd.array([1, 2])
    dense = src.tostype("default")
    assert dense is not src
    np.testing.assert_array_equal(dense.asnumpy(), oracle["tostype"])
    with pytest.raises(NotImplementedError):
        src.tostype("csr")


def test_version_and_error_type_mirror_mxnet(oracle) -> None:
    assert mx.__version__ == oracle.json["version"]
    assert mx.base.MXNetError is mx.MXNetError is MXNetError
    assert [c.__name__ for c in MXNetError.__mro__] == oracle.json["mxnet_error_mro"]
    assert "MXNetError" in oracle.json["dot_mismatch"]
    with pytest.raises(MXNetError):
        nd.dot(nd.ones((2, 3)), nd.ones((2, 3)))


def test_runtime_features(oracle) -> None:
    features = mx.runtime.Features()
    assert features.is_enabled("CUDA") == (mx.num_gpus() > 0)
    assert not oracle.json["features_cuda"]  # the oracle is a CPU build
    assert "RuntimeError" in oracle.json["features_unknown"]
    with pytest.raises(RuntimeError):
        features.is_enabled("NOPE")


def test_relu_gradient_at_nan_is_nan(oracle) -> None:
    x = nd.array([np.nan, 1.0, -1.0])
    x.attach_grad()
    with autograd.record():
        y = nd.relu(x)
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), oracle["relu_nan_grad"])


def test_from_numpy_shares_memory_and_freezes_the_source(oracle) -> None:
    src = np.array([[1, 2], [3, 4]], dtype="float32")
    shared = nd.from_numpy(src)
    shared[1, 1] = 100
    np.testing.assert_array_equal(src, oracle["from_numpy_src"])
    assert _kind(lambda: src.__setitem__((0, 0), 5)) == oracle.json["from_numpy_src_write"]
    assert _kind(lambda: nd.from_numpy(np.ones((2, 3)).T)) == \
        oracle.json["from_numpy_noncontig"]
    assert str(np.dtype(nd.from_numpy(np.arange(3)).dtype)) == oracle.json["from_numpy_dtype"]


def test_dlpack_round_trip(oracle) -> None:
    a = nd.array([[1, 2], [3, 4]])
    np.testing.assert_array_equal(nd.from_dlpack(a.to_dlpack_for_read()).asnumpy(),
                                  oracle["dlpack_read"])
    np.testing.assert_array_equal(nd.from_dlpack(nd.to_dlpack_for_write(a)).asnumpy(),
                                  oracle["dlpack_write"])
