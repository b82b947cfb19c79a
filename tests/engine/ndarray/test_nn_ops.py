"""Convolution, pooling, batch/layer norm and embedding ops: values against direct
(loop) definitions, and gradients against float64 finite differences, on numpy and cupy."""


import numpy as np
import pytest

from engine import autograd, nd
from engine.ndarray import conv_windows
from tests.engine.gradcheck import CONTEXTS, check_grad

rng = np.random.default_rng(0)


def naive_conv(x, w, b, stride, pad, dilate, groups):
    xp_ = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = xp_.shape
    f, cg, k, _ = w.shape
    oh = (h - dilate * (k - 1) - 1) // stride + 1
    ow = (wd - dilate * (k - 1) - 1) // stride + 1
    out = np.zeros((n, f, oh, ow))
    per_group = f // groups
    for o in range(f):
        g = o // per_group
        for i in range(oh):
            for j in range(ow):
                rows = slice(i * stride, i * stride + dilate * (k - 1) + 1, dilate)
                cols = slice(j * stride, j * stride + dilate * (k - 1) + 1, dilate)
                patch = xp_[:, g * cg:(g + 1) * cg, rows, cols]
                out[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3)) + b[o]
    return out


CONV_CASES = {
    "plain": dict(cin=2, cout=3, groups=1, k=3, stride=1, pad=0, dilate=1),
    "stride2_pad1_groups2": dict(cin=4, cout=4, groups=2, k=3, stride=2, pad=1, dilate=1),
    "dilate2_pad1": dict(cin=2, cout=2, groups=1, k=2, stride=1, pad=1, dilate=2),
    "depthwise": dict(cin=3, cout=3, groups=3, k=3, stride=1, pad=1, dilate=1),
}


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_convolution_values_and_gradients(case, ctx):
    p = CONV_CASES[case]
    x = rng.standard_normal((2, p["cin"], 6, 5))
    w = rng.standard_normal((p["cout"], p["cin"] // p["groups"], p["k"], p["k"]))
    b = rng.standard_normal(p["cout"])
    kw = dict(kernel=(p["k"], p["k"]), stride=p["stride"], pad=p["pad"], dilate=p["dilate"],
              num_group=p["groups"], num_filter=p["cout"])
    x64, w64, b64 = (nd.array(a, ctx=ctx, dtype="float64") for a in (x, w, b))
    got = nd.Convolution(x64, w64, b64, **kw).asnumpy()
    want = naive_conv(x, w, b, p["stride"], p["pad"], p["dilate"], p["groups"])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    check_grad(lambda x, w, b: nd.Convolution(x, w, b, **kw), [x, w, b], ctx=ctx)


def test_convolution_without_bias_and_bad_shapes():
    x, w = nd.ones((1, 4, 5, 5)), nd.ones((2, 3, 3, 3))
    with pytest.raises(ValueError, match="channels"):
        nd.Convolution(x, w, kernel=(3, 3), num_filter=2, no_bias=True)
    with pytest.raises(ValueError, match="larger than the padded input"):
        nd.Convolution(nd.ones((1, 3, 2, 2)), w, kernel=(3, 3), no_bias=True)
    out = nd.Convolution(nd.ones((1, 3, 5, 5)), w, kernel=(3, 3), no_bias=True)
    np.testing.assert_allclose(out.asnumpy(), np.full((1, 2, 3, 3), 27.0))


POOL_CASES = [
    ("max", "valid", True), ("max", "full", True), ("avg", "valid", True),
    ("avg", "valid", False), ("avg", "full", True), ("avg", "full", False), ("sum", "valid", True),
]


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("pool_type,convention,include_pad", POOL_CASES)
def test_pooling_gradients(pool_type, convention, include_pad, ctx):
    x = rng.standard_normal((2, 2, 7, 6))
    check_grad(lambda x: nd.Pooling(x, kernel=(3, 2), stride=(2, 2), pad=(1, 1),
                                    pool_type=pool_type, pooling_convention=convention,
                                    count_include_pad=include_pad), [x], ctx=ctx)


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("pool_type", ["max", "avg"])
def test_global_pooling(pool_type, ctx):
    x = rng.standard_normal((2, 3, 4, 5))
    out = nd.Pooling(nd.array(x, ctx=ctx), pool_type=pool_type, global_pool=True)
    ref = x.max(axis=(2, 3), keepdims=True) if pool_type == "max" else x.mean(axis=(2, 3),
                                                                                keepdims=True)
    # float32 sums in another order (the GPU's): the error scales with the data, not the mean
    np.testing.assert_allclose(out.asnumpy(), ref, rtol=1e-6, atol=1e-6 * np.abs(x).max())
    check_grad(lambda x: nd.Pooling(x, pool_type=pool_type, global_pool=True), [x], ctx=ctx)


def test_pooling_values():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    mx = nd.Pooling(nd.array(x), kernel=(2, 2), stride=(2, 2), pool_type="max").asnumpy()
    np.testing.assert_array_equal(mx[0, 0], [[5, 7], [13, 15]])
    # padding counts in the average by default: corner window holds 0 (x) + 3 pads
    avg = nd.Pooling(nd.array(x), kernel=(2, 2), stride=(2, 2), pad=(1, 1),
                     pool_type="avg").asnumpy()
    assert avg[0, 0, 0, 0] == pytest.approx(0 / 4)
    assert avg[0, 0, 1, 1] == pytest.approx((5 + 6 + 9 + 10) / 4)
    excl = nd.Pooling(nd.array(x), kernel=(2, 2), stride=(2, 2), pad=(1, 1), pool_type="avg",
                      count_include_pad=False).asnumpy()
    assert excl[0, 0, 0, 1] == pytest.approx((1 + 2) / 2)
    full = nd.Pooling(nd.array(x), kernel=(3, 3), stride=(2, 2), pool_type="max",
                      pooling_convention="full")
    assert full.shape == (1, 1, 2, 2)
    with pytest.raises(ValueError, match="pool_type"):
        nd.Pooling(nd.array(x), kernel=(2, 2), pool_type="median")


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("fix_gamma", [False, True])
def test_batchnorm_training_gradients_and_running_stats(fix_gamma, ctx):
    x = rng.standard_normal((4, 3, 2, 2))
    gamma, beta = rng.uniform(0.5, 1.5, 3), rng.standard_normal(3)

    def bn(x, gamma, beta):
        # on the inputs' device: check_grad also runs bn on numpy for the float32 cross-check
        rm = nd.zeros((3,), ctx=x.context, dtype="float64")
        rv = nd.ones((3,), ctx=x.context, dtype="float64")
        return nd.BatchNorm(x, gamma, beta, rm, rv, eps=1e-5, fix_gamma=fix_gamma)

    grads = check_grad(bn, [x, gamma, beta], ctx=ctx, train_mode=True)
    if fix_gamma:
        np.testing.assert_array_equal(grads[1], 0)
    rm, rv = nd.zeros((3,), ctx=ctx), nd.ones((3,), ctx=ctx)
    with autograd.train_mode():
        y = nd.BatchNorm(nd.array(x, ctx=ctx), nd.array(gamma, ctx=ctx), nd.array(beta, ctx=ctx),
                         rm, rv, eps=1e-5, momentum=0.9, fix_gamma=False)
    np.testing.assert_allclose(rm.asnumpy(), 0.1 * x.mean(axis=(0, 2, 3)), rtol=1e-5)
    np.testing.assert_allclose(rv.asnumpy(), 0.9 + 0.1 * x.var(axis=(0, 2, 3)), rtol=1e-5)
    mean, var = x.mean((0, 2, 3), keepdims=True), x.var((0, 2, 3), keepdims=True)
    xhat = (x - mean) / np.sqrt(var + 1e-5)
    np.testing.assert_allclose(y.asnumpy(), xhat * gamma.reshape(1, 3, 1, 1)
                               + beta.reshape(1, 3, 1, 1), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("ctx", CONTEXTS)
def test_batchnorm_inference_uses_running_stats(ctx):
    x = rng.standard_normal((3, 2, 4))
    rm, rv = rng.standard_normal(2), rng.uniform(0.5, 2.0, 2)

    def bn(x, gamma, beta):
        return nd.BatchNorm(x, gamma, beta, nd.array(rm, ctx=x.context, dtype="float64"),
                            nd.array(rv, ctx=x.context, dtype="float64"), eps=1e-3,
                            fix_gamma=False)

    gamma, beta = rng.uniform(0.5, 1.5, 2), rng.standard_normal(2)
    check_grad(bn, [x, gamma, beta], ctx=ctx, train_mode=False)
    out = bn(nd.array(x, ctx=ctx, dtype="float64"), nd.array(gamma, ctx=ctx, dtype="float64"),
             nd.array(beta, ctx=ctx, dtype="float64"))
    want = (x - rm[None, :, None]) / np.sqrt(rv[None, :, None] + 1e-3) * gamma[None, :, None] \
        + beta[None, :, None]
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-10)


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("axis", [-1, 1])
def test_layernorm(axis, ctx):
    x = rng.standard_normal((2, 3, 4))
    c = x.shape[axis]
    gamma, beta = rng.uniform(0.5, 1.5, c), rng.standard_normal(c)
    check_grad(lambda x, g, b: nd.LayerNorm(x, g, b, axis=axis, eps=1e-5), [x, gamma, beta],
               ctx=ctx)
    out = nd.LayerNorm(*(nd.array(a, ctx=ctx, dtype="float64") for a in (x, gamma, beta)),
                       axis=axis, eps=1e-5).asnumpy()
    shape = [1, 1, 1]
    shape[axis] = c
    want = (x - x.mean(axis, keepdims=True)) / np.sqrt(x.var(axis, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out, want * gamma.reshape(shape) + beta.reshape(shape), rtol=1e-10)


@pytest.mark.parametrize("ctx", CONTEXTS)
def test_embedding_gathers_rows_and_scatters_gradients(ctx):
    weight = rng.standard_normal((5, 3))
    idx = np.array([[0, 4], [4, 9]])  # 9 is clipped to the last row, as MXNet does
    out = nd.Embedding(nd.array(idx, ctx=ctx), nd.array(weight, ctx=ctx, dtype="float64"),
                       input_dim=5, output_dim=3)
    np.testing.assert_allclose(out.asnumpy(), weight[np.clip(idx, 0, 4)])
    (gw,) = check_grad(lambda i, w: nd.Embedding(i, w, input_dim=5, output_dim=3),
                       [idx, weight], wrt=[1], ctx=ctx)
    assert np.all(gw[1:4] == 0) and np.all(gw[4] != 0)


def test_ops_reject_wrong_parameter_shapes():
    x = nd.ones((2, 3, 4))
    with pytest.raises(ValueError, match="gamma has 2 values but data has 3 channels"):
        nd.BatchNorm(x, nd.ones((2,)), nd.zeros((3,)), nd.zeros((3,)), nd.ones((3,)))
    with pytest.raises(ValueError, match="LayerNorm"):
        nd.LayerNorm(x, nd.ones((3,)), nd.zeros((3,)))
    with pytest.raises(ValueError, match="input_dim"):
        nd.Embedding(nd.array([1]), nd.ones((4, 2)), input_dim=5, output_dim=2)


def test_gradcheck_catches_a_wrong_backward_rule():
    from engine.ndarray.ndarray import apply_op

    def bad_square(x):
        return apply_op(x.raw ** 2, (x,), lambda g: (g * x.raw,))  # missing factor 2

    with pytest.raises(AssertionError, match="finite differences"):
        check_grad(bad_square, [rng.standard_normal(4)])


def test_conv_ops_do_not_copy_for_the_window_view():
    x = np.arange(2 * 3 * 5 * 5, dtype=np.float64).reshape(2, 3, 5, 5)
    xl = conv_windows.to_channels_last(x, False)  # (N, H, W, C) view of the NCHW array
    view = conv_windows.windows(np, xl, (2, 2), (3, 3), (2, 2), (1, 1))
    assert np.shares_memory(view, x)
    np.testing.assert_array_equal(view[1, 1, 0, :, :, 2], x[1, 2, 2:5, 0:3])


def test_npx_names():
    import engine as mx

    mx.npx.set_np()
    try:  # set_np switches the shape rule process-wide: always switch it back
        x = nd.array([[-1.0, 2.0], [0.5, 0.0]])
        np.testing.assert_array_equal(mx.npx.relu(x).asnumpy(), [[0, 2], [0.5, 0]])
        np.testing.assert_allclose(mx.npx.softmax(x).asnumpy().sum(-1), [1, 1], rtol=1e-6)
        np.testing.assert_allclose(mx.npx.sigmoid(nd.zeros(1)).asnumpy(), [0.5])
        assert mx.npx.one_hot(nd.array([1, 0]), 3).shape == (2, 3)
        np.testing.assert_array_equal(mx.npx.pick(x, nd.array([1, 0])).asnumpy(), [2, 0.5])
        assert mx.npx.activation(x, act_type="tanh").shape == (2, 2)
    finally:
        mx.npx.reset_np()
