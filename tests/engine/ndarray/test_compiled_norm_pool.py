"""BatchNorm and max-pooling through the compiled kernels (engine.ndarray.cpu_kernels).

The kernels take float32 data laid out channels-last in memory, as a convolution returns
it. Each test runs the op on such data and compares with the numpy path of the same op on
the same values in float64 (whose gradients test_nn_ops checks against finite differences).
"""

import numpy as np
import pytest

from engine import autograd, nd
from engine.ndarray import cpu_kernels, kernel_threads

rng = np.random.default_rng(5)


def channels_last(x):
    """An (N, C, H, W) NDArray whose memory is (N, H, W, C), as a convolution's output
    (nd.transpose would copy it back to channels-first, as MXNet's operator does)."""
    return nd.NDArray(np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose((0, 3, 1, 2)))


def test_numba_is_there_so_the_compiled_path_is_what_these_tests_exercise():
    assert cpu_kernels.ENABLED
    x = channels_last(np.ones((1, 2, 2, 2), np.float32))
    assert cpu_kernels.available(x.raw) and not x.raw.flags.c_contiguous


def _batch_norm(x, gamma, beta, fix_gamma, dtype):
    rm, rv = nd.array(rng.standard_normal(x.shape[1])), nd.array(rng.uniform(1, 2, x.shape[1]))
    args = [channels_last(x) if dtype == np.float32 else nd.array(x, dtype=dtype),
            nd.array(gamma, dtype=dtype), nd.array(beta, dtype=dtype)]
    for a in args:
        a.attach_grad()
    head = rng.standard_normal(x.shape)
    with autograd.record():
        y = nd.BatchNorm(*args, rm, rv, eps=1e-5, momentum=0.8, fix_gamma=fix_gamma)
    y.backward(nd.array(head, dtype=dtype))
    return [y.asnumpy(), rm.asnumpy(), rv.asnumpy()] + [a.grad.asnumpy() for a in args]


@pytest.mark.parametrize("fix_gamma", [False, True])
@pytest.mark.parametrize("offset", [0.0, 300.0])
def test_batchnorm_training_matches_the_float64_numpy_path(fix_gamma, offset):
    # a large common offset would cancel catastrophically in a naive E[x²]-E[x]² variance
    x = (rng.standard_normal((4, 5, 6, 3)) * rng.uniform(0.5, 2, (1, 5, 1, 1)) + offset)
    gamma, beta = rng.uniform(0.5, 1.5, 5), rng.standard_normal(5)
    state = rng.bit_generator.state
    got = _batch_norm(x.astype(np.float32), gamma, beta, fix_gamma, np.float32)
    rng.bit_generator.state = state  # same running statistics and head gradient
    want = _batch_norm(x, gamma, beta, fix_gamma, np.float64)
    for name, a, b in zip(["out", "running_mean", "running_var", "dx", "dgamma", "dbeta"],
                          got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4 * max(1, np.abs(b).max()),
                                   err_msg=name)
    if fix_gamma:
        np.testing.assert_array_equal(got[4], 0)


def test_batchnorm_keeps_the_layout_of_its_input():
    x = channels_last(rng.standard_normal((2, 4, 3, 3)).astype(np.float32))
    with autograd.train_mode():
        y = nd.BatchNorm(x, nd.ones((4,)), nd.zeros((4,)), nd.zeros((4,)), nd.ones((4,)))
    assert y.raw.transpose(0, 2, 3, 1).flags.c_contiguous


def _max_pool(x, layout_last):
    arr = channels_last(x) if layout_last else nd.array(x)
    arr.attach_grad()
    head = np.arange(np.prod(x.shape) // 4, dtype=np.float32).reshape(
        x.shape[0], x.shape[1], x.shape[2] // 2, x.shape[3] // 2)
    with autograd.record():
        y = nd.Pooling(arr, kernel=(2, 2), stride=(2, 2), pool_type="max")
    y.backward(nd.array(head))
    return y.asnumpy(), arr.grad.asnumpy()


def test_max_pool_2x2_matches_the_numpy_path_exactly_with_ties():
    # few distinct values: most windows hold their maximum twice or more, and the gradient
    # must go to the first one in row-major order, as MXNet's backward does
    x = rng.integers(0, 3, (2, 3, 6, 4)).astype(np.float32)
    got, want = _max_pool(x, True), _max_pool(x, False)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert got[1].transpose(0, 2, 3, 1).flags.c_contiguous  # channels-last, as the input


def test_max_pool_2x2_propagates_nan_as_numpys_maximum():
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    x[0, 1, 1, 0] = np.nan
    out = _max_pool(x, True)[0]
    assert np.isnan(out[0, 1, 0, 0]) and np.isfinite(np.delete(out.ravel(), 4)).all()


def test_max_pool_of_odd_sizes_drops_the_last_row():
    x = rng.standard_normal((1, 2, 5, 4)).astype(np.float32)
    y = nd.Pooling(channels_last(x), kernel=(2, 2), stride=(2, 2), pool_type="max")
    want = x[:, :, :4].reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5))
    np.testing.assert_array_equal(y.asnumpy(), want)


def _pool(x, dtype, **geometry):
    """Max-pool output and input gradient; float32 takes the compiled kernels (channels-last
    memory), float64 the numpy path. The head gradient holds small integers, so sums of them
    are exact in any order and the two paths must agree bit for bit."""
    arr = channels_last(x.astype(np.float32)) if dtype == np.float32 \
        else nd.array(x, dtype=np.float64)
    arr.attach_grad()
    with autograd.record():
        y = nd.Pooling(arr, pool_type="max", **geometry)
    head = np.random.default_rng(3).integers(-4, 5, y.shape)
    y.backward(nd.array(head, dtype=dtype))
    out = y.asnumpy()  # a window wholly past the input holds the dtype's lowest value
    return np.where(out == np.finfo(dtype).min, -np.inf, out), arr.grad.asnumpy()


POOLS = [dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1)),  # ResNet's stem: windows overlap
         dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pooling_convention="full"),
         dict(kernel=(2, 3), stride=(1, 2), pad=(0, 1)),
         dict(kernel=(3, 3), stride=(1, 1), pad=(1, 1)),
         dict(kernel=(2, 2), stride=(3, 3), pooling_convention="full")]  # gaps, ceil mode


@pytest.mark.parametrize("geometry", POOLS)
def test_max_pool_of_any_window_matches_the_numpy_path(geometry):
    # few distinct values: ties everywhere, and the gradient goes to each window's first
    # maximum in row-major order (MXNet's backward); padding never takes it
    x = rng.integers(-2, 2, (2, 3, 9, 7)).astype(np.float64)
    got, want = _pool(x, np.float32, **geometry), _pool(x, np.float64, **geometry)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_max_pool_of_any_window_is_the_same_on_any_thread_count(every_kernel_parallel):
    x = rng.standard_normal((6, 8, 17, 15))
    before = kernel_threads.count()
    try:
        results = []
        for count in (1, 2, 3):
            kernel_threads.set_count(count)
            results.append(_pool(x, np.float32, **POOLS[0]))
    finally:
        kernel_threads.set_count(before)
    for got in results[1:]:
        assert all(g.tobytes() == r.tobytes() for g, r in zip(got, results[0], strict=True))


def _first_max_reference(x, kh, kw, sh, sw, ph, pw, oh, ow):
    """The window rule in plain Python: padding at position 0 stands for the dtype's lowest
    value; each later cell inside the input replaces the running maximum when it is larger
    or NaN, unless a NaN already holds it (so the first NaN, or the first of tied maxima,
    keeps it: its bits, -0.0 or 0.0, and its position)."""
    lowest = np.finfo(np.float32).min
    n_, h_, w_, c_ = x.shape
    out = np.empty((n_, oh, ow, c_), np.float32)
    arg = np.empty(out.shape, np.uint8)
    for n, i, j, c in np.ndindex(*out.shape):
        best, at = np.float32(lowest), 0
        for k in range(kh * kw):
            y, xx = i * sh - ph + k // kw, j * sw - pw + k % kw
            if not (0 <= y < h_ and 0 <= xx < w_):
                continue
            v = x[n, y, xx, c]
            if k == 0 or ((v > best or np.isnan(v)) and not np.isnan(best)):
                best, at = v, k
        out[n, i, j, c], arg[n, i, j, c] = best, at
    return out, arg


@pytest.mark.parametrize("geometry", [(3, 3, 2, 2, 1, 1), (2, 2, 2, 2, 0, 0), (3, 2, 2, 1, 1, 0),
                                      (3, 3, 3, 3, 2, 2)])
def test_max_pool_kernel_keeps_the_first_nan_signed_zero_and_padding_ties(geometry):
    # values that tie, NaNs, both zeros, infinities and the padding's own lowest value
    kh, kw, sh, sw, ph, pw = geometry
    lowest = np.finfo(np.float32).min
    cells = np.array([0.0, -0.0, 1.0, -1.0, np.nan, -np.inf, np.inf, lowest], np.float32)
    x = np.random.default_rng(5).choice(cells, (2, 7, 6, 9))
    oh, ow = (7 + 2 * ph - kh) // sh + 2, (6 + 2 * pw - kw) // sw + 2  # ceil mode's extra
    want_out, want_arg = _first_max_reference(x, kh, kw, sh, sw, ph, pw, oh, ow)
    for build in (cpu_kernels.max_pool_2d.serial, cpu_kernels.max_pool_2d):
        out = np.empty((2, oh, ow, 9), np.float32)
        arg = np.empty(out.shape, np.uint8)
        build(x, kh, kw, sh, sw, ph, pw, np.float32(lowest), out, arg)
        assert out.tobytes() == want_out.tobytes()
        np.testing.assert_array_equal(arg, want_arg)


@pytest.mark.parametrize("pool_type", ["avg", "sum"])
def test_global_average_and_sum_pools_are_numpys_sums_bit_for_bit_on_any_thread_count(
        pool_type, every_kernel_parallel):
    # the compiled pass adds each channel's cells in numpy's order (position after
    # position, in float32), so its floats are numpy's own, for any thread count
    x = (rng.standard_normal((6, 5, 7, 9)) * 40).astype(np.float32)
    head = rng.standard_normal((6, 5, 1, 1)).astype(np.float32)
    scale = np.float32(1 / 63) if pool_type == "avg" else np.float32(1)
    want_out = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).sum(axis=(1, 2)) * scale
    want_grad = np.broadcast_to(head * scale, x.shape)
    before = kernel_threads.count()
    try:
        for count in (1, 2, 3):
            kernel_threads.set_count(count)
            arr = channels_last(x)
            arr.attach_grad()
            with autograd.record():
                y = nd.Pooling(arr, global_pool=True, pool_type=pool_type, kernel=(1, 1))
            y.backward(nd.array(head))
            assert y.shape == (6, 5, 1, 1)
            assert y.asnumpy().reshape(6, 5).tobytes() == want_out.tobytes()
            assert arr.grad.asnumpy().tobytes() == np.ascontiguousarray(want_grad).tobytes()
            assert arr.grad.raw.transpose(0, 2, 3, 1).flags.c_contiguous  # as its input
    finally:
        kernel_threads.set_count(before)


def test_global_pool_of_channels_first_memory_keeps_the_numpy_path():
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    y = nd.Pooling(nd.array(x), global_pool=True, pool_type="avg", kernel=(1, 1))
    np.testing.assert_allclose(y.asnumpy(), x.mean(axis=(2, 3), keepdims=True), rtol=1e-6)
