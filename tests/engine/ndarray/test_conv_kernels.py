"""The compiled float32 convolution path (engine/ndarray/conv_kernels.py) against the numpy
im2col path, which the MXNet-comparison tests cover: float64 inputs take the numpy path, so
the same convolution in float32 and float64 must agree to float32 precision, forward and
all three gradients, for every column layout the compiled path picks."""

import numpy as np
import pytest

from engine import autograd, nd
from engine.ndarray import conv_kernels, conv_ops, cpu_kernels, winograd, winograd4

pytestmark = pytest.mark.skipif(not cpu_kernels.ENABLED, reason="numba is not installed")

# (N, C, H, W, F, kernel, stride, dilate, pad)
GEOMETRIES = [
    (2, 3, 9, 11, 5, (3, 3), (1, 1), (1, 1), (1, 1)),
    (2, 4, 9, 8, 6, (3, 2), (2, 1), (1, 2), (1, 0)),
    (3, 5, 10, 7, 4, (2, 3), (1, 3), (2, 1), (2, 1)),
    (1, 2, 6, 6, 3, (1, 1), (2, 2), (1, 1), (0, 0)),
    (2, 3, 5, 5, 2, (5, 5), (1, 1), (1, 1), (3, 3)),  # padding wider than the kernel reach
    (2, 9, 6, 7, 4, (3, 3), (1, 1), (1, 1), (1, 1)),  # NCHW with 9 channels: channels-last
]


def _run(x, w, b, layout, kwargs, channels_last_memory=False):
    arrays = [nd.array(a, dtype=a.dtype) for a in (x, w, b)]
    if channels_last_memory:  # an NCHW view of NHWC memory, as every hidden layer gets
        arrays[0] = nd.NDArray(arrays[0].raw.transpose(0, 3, 1, 2))
    for a in arrays:
        a.attach_grad()
    with autograd.record():
        y = nd.Convolution(*arrays, num_filter=w.shape[0], layout=layout, **kwargs)
    head = np.cos(np.arange(y.size, dtype=np.float64)).reshape(y.shape).astype(x.dtype)
    y.backward(nd.array(head, dtype=head.dtype))
    return [y.asnumpy(), *(a.grad.asnumpy() for a in arrays)]


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("memory", ["nchw", "channels_last_memory", "nhwc"])
@pytest.mark.parametrize("block_bytes", [None, 1])
def test_compiled_path_matches_numpy_path(geometry, memory, block_bytes, monkeypatch):
    if block_bytes is not None:  # one image a block (a kernel-major forward and weight
        # gradient, every data gradient)
        monkeypatch.setattr(conv_ops, "_BLOCK_BYTES", block_bytes)
        monkeypatch.setattr(conv_ops, "_MIN_BLOCK_ROWS", 1)
    n, c, h, w_, f, kernel, stride, dilate, pad = geometry
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, c, h, w_))
    w = rng.standard_normal((f, c, *kernel))
    b = rng.standard_normal(f)
    layout = None
    if memory == "nhwc":
        layout = "NHWC"
        x, w = x.transpose(0, 2, 3, 1).copy(), w.transpose(0, 2, 3, 1).copy()
    if memory == "channels_last_memory":
        x = x.transpose(0, 2, 3, 1).copy()
    kwargs = {"kernel": kernel, "stride": stride, "dilate": dilate, "pad": pad}
    nhwc_view = memory == "channels_last_memory"
    expected = _run(x, w, b, layout, kwargs, nhwc_view)
    got = _run(*(a.astype(np.float32) for a in (x, w, b)), layout, kwargs, nhwc_view)
    for name, e, g in zip(("y", "gx", "gw", "gb"), expected, got, strict=True):
        assert (e.dtype, g.dtype) == (np.float64, np.float32)  # the two paths ran
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("geometry", [g for g in GEOMETRIES[:5] if g[0] > 1])  # 2+ blocks
def test_kept_input_layer_columns_give_the_floats_of_columns_made_again(geometry,
                                                                       monkeypatch):
    """A blocked kernel-major forward keeps its columns for the weight gradient (up to
    _KEEP_COLUMNS_BYTES) instead of making them again: the same floats either way."""
    monkeypatch.setattr(conv_ops, "_BLOCK_BYTES", 1)  # one image a block
    monkeypatch.setattr(conv_ops, "_MIN_BLOCK_ROWS", 1)
    n, c, h, w_, f, kernel, stride, dilate, pad = geometry
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s).astype(np.float32)
              for s in ((n, c, h, w_), (f, c, *kernel), (f,))]
    kwargs = {"kernel": kernel, "stride": stride, "dilate": dilate, "pad": pad}
    made = []
    original = conv_kernels.im2col_kernel_major
    monkeypatch.setattr(conv_kernels, "im2col_kernel_major",
                        lambda *a: made.append(1) or original(*a))
    kept = _run(*arrays, None, kwargs)
    made_when_kept, made[:] = len(made), []
    monkeypatch.setattr(conv_ops, "_KEEP_COLUMNS_BYTES", 0)
    again = _run(*arrays, None, kwargs)
    assert made_when_kept == n and len(made) == 2 * n  # one image a block, each way
    for a, b in zip(kept, again, strict=True):
        np.testing.assert_array_equal(a, b)


def test_im2col_layouts_hold_the_same_windows():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7, 9)).astype(np.float32)
    args = (3, 2, 1, 2, 1, 1, 1, 0, 7, 4)  # kernel, stride, dilate, pad, out sizes
    rows = np.empty((2 * 7 * 4, 6 * 3), np.float32)
    conv_kernels.im2col_rows(x.transpose(0, 2, 3, 1), *args, rows)
    major = np.empty((3 * 6, 2 * 7 * 4), np.float32)
    conv_kernels.im2col_kernel_major(x, *args, major)
    # rows are (kh, kw, c)-ordered, kernel-major rows (c, kh, kw)-ordered
    as_major = rows.reshape(-1, 6, 3).transpose(2, 1, 0).reshape(18, -1)
    np.testing.assert_array_equal(major, as_major)
    # output (0, 0, 0) at kernel position (2, 1) reads input row 2·1 - 1, column 1·1 - 0
    np.testing.assert_array_equal(rows[0].reshape(6, 3)[2 * 2 + 1], x[0, :, 1, 1])
    assert not rows[0].reshape(3, 2, 3)[0].any()  # kernel row 0 reads the top padding


@pytest.mark.parametrize("rows", [False, True])
def test_taps_transposed_is_numpys_transposing_copy(rows):
    """F(4x4)'s forward operand (9, C, F) from 3x3 filters (F, C, 9), whole blocks and a
    ragged edge; ``rows``: a channels-last weight's (F, 9·C) rows seen taps last (strided)."""
    rng = np.random.default_rng(4)
    f, c = 37, 21
    if rows:
        w3 = rng.standard_normal((f, 9, c)).astype(np.float32).transpose(0, 2, 1)
    else:
        w3 = rng.standard_normal((f, c, 9)).astype(np.float32)
    out = np.full((9, c, f), np.nan, np.float32)
    conv_kernels.taps_transposed(w3, out)
    np.testing.assert_array_equal(out, w3.transpose(2, 1, 0))


@pytest.mark.parametrize("last", [False, True])
def test_tap_gradient_writes_zeros_but_for_the_tap(last):
    """The 1-pixel-map weight gradient: every value of the (stale) buffer rewritten, zero
    but at the one kernel position, which holds the tap's gradient, in either layout."""
    rng = np.random.default_rng(3)
    f, c, (kh, kw), tap = 6, 5, (3, 2), (2, 1)
    grad = rng.standard_normal((f, c)).astype(np.float32)
    gw = np.full((f, kh, kw, c) if last else (f, c, kh, kw), np.nan, np.float32)
    position = tap[0] * kw + tap[1]
    offset, step = (position * c, 1) if last else (position, kh * kw)
    conv_kernels.tap_gradient(grad, offset, step, gw.reshape(f, -1))
    want = np.zeros_like(gw)
    want[(slice(None), *tap, slice(None)) if last else (slice(None), slice(None), *tap)] = grad
    np.testing.assert_array_equal(gw, want)


@pytest.mark.parametrize("shape, pad", [((2, 6, 6, 5), (1, 1)), ((1, 7, 5, 3), (0, 2))])
def test_winograd_transforms_compute_the_numpy_floats(shape, pad):
    """The compiled Winograd transforms do the numpy transforms' adds in the same order."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    plan = winograd.Plan(shape, 4, pad)
    xpad = np.zeros(plan.padded_shape(), np.float32)
    xpad[plan.interior()] = x
    tiles = (4, 4, plan.n, plan.th, plan.tw)
    expected, got = np.empty((*tiles, plan.c), np.float32), np.empty((*tiles, plan.c), np.float32)
    winograd._input_transform(winograd._tiles(xpad, plan.th, plan.tw), expected)
    conv_kernels.winograd_input_transform(x, *pad, got)
    np.testing.assert_array_equal(got, expected)

    m = rng.standard_normal((*tiles, plan.f)).astype(np.float32)
    bias = rng.standard_normal(plan.f).astype(np.float32)
    expected = np.empty((plan.n, 2 * plan.th, 2 * plan.tw, plan.f), np.float32)
    winograd._output_transform(m, winograd._blocks(expected))
    expected += bias
    got = np.empty_like(expected)
    conv_kernels.winograd_output_transform(m, bias, True, got)
    np.testing.assert_array_equal(got, expected)

    gl = rng.standard_normal((plan.n, 2 * plan.th, 2 * plan.tw, plan.f)).astype(np.float32)
    expected, got = np.empty((*tiles, plan.f), np.float32), np.empty((*tiles, plan.f), np.float32)
    winograd._grad_transform(winograd._blocks(gl), expected)
    conv_kernels.winograd_grad_transform(gl, got)
    np.testing.assert_array_equal(got, expected)

    # the data gradient sums overlapping tiles in another order: equal to rounding
    dv = rng.standard_normal((*tiles, plan.c)).astype(np.float32)
    gpad = np.zeros(plan.padded_shape(), np.float32)
    winograd._add_input_grad(dv, gpad, plan.th, plan.tw)
    got = np.empty(shape, np.float32)
    conv_kernels.winograd_input_grad(dv, *pad, got)
    np.testing.assert_allclose(got, gpad[plan.interior()], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("m", [4, 6])  # F(2x2)'s G and F(4x4)'s
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_filter_transforms_match_the_kronecker_products(m, dtype):
    """U = G w Gᵀ and dw = Gᵀ dU G by the compiled kernels (and Uᵀ by its product) equal the
    (m², 9) Kronecker-matrix products in float64, for filter counts that leave a short last block,
    from the weight's rows or from the weight as stored, and give the same floats on the
    kernels' serial and parallel builds."""
    g = winograd._G if m == 4 else winograd4._G
    gg = np.kron(g, g)
    rng = np.random.default_rng(m)
    f, c = 37, 11
    wrows = rng.standard_normal((f, 9 * c)).astype(dtype)
    taps = wrows.astype(np.float64).reshape(f, 9, c)
    want = np.einsum("kt,ftc->kfc", gg, taps)
    filters = winograd.FilterTransform(g)
    u = filters.to_domain(wrows, c)
    ut = filters.to_domain(wrows, c, transposed=True)
    tol = 1e-6 if dtype == np.float32 else 1e-14
    assert u.dtype == dtype and u.shape == (m * m, f, c) and ut.shape == (m * m, c, f)
    np.testing.assert_allclose(u, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(ut, want.transpose(0, 2, 1), rtol=tol, atol=tol)
    du = rng.standard_normal((m * m, f, c)).astype(dtype)
    rows = filters.from_domain(du)
    want_rows = np.einsum("kt,kfc->ftc", gg, du.astype(np.float64)).reshape(f, 9 * c)
    np.testing.assert_allclose(rows, want_rows, rtol=tol * 4, atol=tol * 4)
    # the weight as MXNet stores it, (F, C, 3, 3), read in place and its gradient written so:
    # the same floats as through its rows
    stored = np.ascontiguousarray(wrows.reshape(f, 3, 3, c).transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(filters.to_domain(stored, c), u)
    np.testing.assert_array_equal(filters.to_domain(stored, c, transposed=True), ut)
    stored_grad = filters.from_domain(du, np.empty((f, c, 3, 3), dtype))
    np.testing.assert_array_equal(stored_grad, rows.reshape(f, 3, 3, c).transpose(0, 3, 1, 2))
    for build in ("serial", "parallel"):
        again = np.empty_like(u)
        getattr(conv_kernels.filter_transform, build)(winograd.taps_last(wrows, c),
                                                      g.astype(dtype), again)
        np.testing.assert_array_equal(again, u)
        again_rows = np.empty((f, 9 * c), dtype)
        getattr(conv_kernels.filter_transform_grad, build)(
            du, g.astype(dtype), winograd.taps_last(again_rows, c))
        np.testing.assert_array_equal(again_rows, rows)
