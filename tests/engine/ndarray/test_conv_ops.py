"""Differential tests of nd.Convolution, nd.Deconvolution and nd.Pooling against MXNet 1.9.1.

Each case is one fixed source run in MXNet (the oracle venv) and in the engine with the
same inputs; outputs and the gradients of ``sum(y * cos(y))``-style heads must agree. 1-D,
2-D and 3-D, stride, dilation, padding, groups, channels-last layouts, ``adj`` and
``target_shape``, pooling conventions and ``count_include_pad``. MXNet runs once per module.
"""

import itertools
import textwrap

import numpy as np
import pytest

import engine
from engine import autograd, nd
from tests.engine.gradcheck import check_grad
from tests.oracle import needs_mxnet, run_mxnet

rng = np.random.RandomState(7)
INPUTS = {k: np.asarray(v, dtype=np.float32) for k, v in {
    "x1": rng.randn(2, 4, 11), "x2": rng.randn(2, 4, 9, 8), "x3": rng.randn(2, 4, 5, 6, 5),
    "w1": rng.randn(6, 2, 3), "w2": rng.randn(6, 2, 3, 2), "w3": rng.randn(6, 2, 2, 3, 2),
    "wd1": rng.randn(4, 3, 3), "wd2": rng.randn(4, 3, 3, 2), "wd3": rng.randn(4, 3, 2, 3, 2),
    "b6": rng.randn(6), "b3": rng.randn(3), "b6d": rng.randn(6),
}.items()}

CASES = {
    # (data, weight, kernel, stride, dilate, pad, num_group) for 1-D, 2-D, 3-D
    "convolution": """
        configs = [("x1", "w1", (3,), (2,), (1,), (1,), 2), ("x1", "w1", (3,), (1,), (3,), (2,), 2),
                   ("x2", "w2", (3, 2), (2, 1), (1, 2), (1, 0), 2),
                   ("x2", "w2", (3, 2), (1, 3), (2, 1), (2, 1), 2),
                   ("x3", "w3", (2, 3, 2), (1, 2, 2), (2, 1, 1), (1, 1, 0), 2)]
        for i, (xn, wn, k, s, d, p, g) in enumerate(configs):
            x, w, b = nd.array(inputs[xn]), nd.array(inputs[wn]), nd.array(inputs["b6"])
            if i == 1:
                w = nd.array(inputs[wn][:, :2].repeat(2, axis=1))  # num_group=1: 4 channels
                g = 1
            for a in (x, w, b):
                a.attach_grad()
            with autograd.record():
                y = nd.Convolution(data=x, weight=w, bias=b, kernel=k, stride=s, dilate=d,
                                   pad=p, num_filter=6, num_group=g, no_bias=False)
            y.backward(nd.cos(y))
            outputs.update({"y%d" % i: y, "gx%d" % i: x.grad, "gw%d" % i: w.grad,
                            "gb%d" % i: b.grad})
    """,
    # (data, weight, kernel, stride, dilate, pad, adj, target_shape, num_group)
    "deconvolution": """
        configs = [("x1", "wd1", (3,), (2,), (1,), (1,), (1,), (), 1),
                   ("x2", "wd2", (3, 2), (2, 3), (1, 1), (1, 0), (1, 2), (), 1),
                   ("x2", "wd2", (3, 2), (2, 2), (1, 1), (0, 0), (0, 0), (19, 16), 1),
                   ("x2", "wd2", (3, 2), (1, 2), (1, 1), (1, 1), (0, 1), (), 2),
                   ("x3", "wd3", (2, 3, 2), (2, 1, 2), (1, 1, 1), (0, 1, 1), (1, 0, 1), (), 1)]
        for i, (xn, wn, k, s, d, p, a, t, g) in enumerate(configs):
            x, w = nd.array(inputs[xn]), nd.array(inputs[wn])
            b = nd.array(inputs["b6d"][:3 * g])
            for arr in (x, w, b):
                arr.attach_grad()
            with autograd.record():
                y = nd.Deconvolution(data=x, weight=w, bias=b, kernel=k, stride=s, dilate=d,
                                     pad=p, adj=a, target_shape=t, num_filter=3 * g,
                                     num_group=g, no_bias=False)
            y.backward(nd.cos(y))
            outputs.update({"y%d" % i: y, "gx%d" % i: x.grad, "gw%d" % i: w.grad,
                            "gb%d" % i: b.grad})
    """,
    # (data, kernel, stride, pad, pool_type, convention, count_include_pad, global, layout)
    # MXNet's CPU kernels take channels-first only (channels-last: see test_channels_last_*)
    "pooling": """
        configs = [("x1", (3,), (2,), (1,), "max", "valid", True, False, None),
                   ("x1", (4,), (3,), (1,), "avg", "full", False, False, None),
                   ("x2", (3, 2), (2, 2), (1, 1), "max", "full", True, False, None),
                   ("x2", (3, 3), (2, 1), (1, 1), "avg", "full", True, False, None),
                   ("x2", (2, 3), (), (), "max", "valid", True, False, None),
                   ("x2", (3, 2), (2, 2), (1, 0), "sum", "valid", True, False, None),
                   ("x3", (2, 3, 2), (2, 2, 1), (1, 1, 0), "max", "full", True, False, None),
                   ("x3", (3, 2, 2), (1, 2, 2), (1, 0, 1), "avg", "valid", False, False, None),
                   ("x3", (1, 1, 1), (), (), "max", "valid", True, True, None),
                   ("x1", (1,), (), (), "avg", "valid", True, True, None),
                   ("x2", (1, 1), (), (), "max", "valid", True, True, None)]
        for i, (xn, k, s, p, kind, conv, incl, glob, layout) in enumerate(configs):
            x = nd.array(inputs[xn])
            x.attach_grad()
            with autograd.record():
                y = nd.Pooling(data=x, kernel=k, stride=s, pad=p, pool_type=kind,
                               pooling_convention=conv, count_include_pad=incl,
                               global_pool=glob)
            y.backward(nd.cos(y))
            outputs.update({"y%d" % i: y, "gx%d" % i: x.grad})
    """,
    "max_pool_ties": """
        x = nd.array(np.array([[[[1, 3, 3, 0], [3, 2, 1, 3], [0, 0, 5, 5], [0, 0, 5, 5]]]],
                              dtype=np.float32))
        x.attach_grad()
        with autograd.record():
            y = nd.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max")
        y.backward()
        outputs.update({"y": y, "gx": x.grad})
    """,
}


def _as_function(name, body):
    return f"def case_{name}(inputs, outputs, result):\n" + textwrap.indent(
        textwrap.dedent(body), "    ")


@pytest.fixture(scope="module")
def mxnet_results():
    calls = []
    for name, body in CASES.items():
        calls.append(_as_function(name, body))
        calls.append(f"_out = {{}}\ncase_{name}(inputs, _out, result)\n"
                     f"outputs.update({{'{name}.' + k: v for k, v in _out.items()}})\n")
    return run_mxnet("\n".join(calls), INPUTS, timeout=300)


def run_engine(name):
    scope = {"mx": engine, "nd": nd, "autograd": autograd, "np": np}
    exec(_as_function(name, CASES[name]), scope)  # the fixed test source above
    outputs = {}
    scope[f"case_{name}"]({k: v.copy() for k, v in INPUTS.items()}, outputs, {})
    return {k: v.asnumpy() for k, v in outputs.items()}


@needs_mxnet
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_mxnet(name, mxnet_results):
    ours = run_engine(name)
    theirs = {k.split(".", 1)[1]: v for k, v in mxnet_results.arrays.items()
              if k.startswith(name + ".")}
    assert sorted(ours) == sorted(theirs)
    for key in sorted(theirs):
        assert ours[key].shape == theirs[key].shape, f"{name}: {key}"
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-4, atol=1e-4,
                                   err_msg=f"{name}: {key}")


def _grads(fn, *arrays):
    arrays = [nd.array(a) for a in arrays]
    for a in arrays:
        a.attach_grad()
    with autograd.record():
        y = fn(*arrays)
    y.backward(nd.cos(y))
    return [y.asnumpy()] + [a.grad.asnumpy() for a in arrays]


CHANNELS_LAST = {3: (0, 2, 1), 4: (0, 2, 3, 1), 5: (0, 2, 3, 4, 1)}


@pytest.mark.parametrize("nd_", [1, 2, 3])
def test_channels_last_layouts_equal_the_checked_channels_first_ops(nd_):
    """NWC/NHWC/NDHWC (data and weights channels-last, as MXNet infers them) give the
    channels-first results (checked against MXNet above), transposed."""
    first, last = {1: ("NCW", "NWC"), 2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}[nd_]
    x = rng.randn(2, 4, *(6,) * nd_)
    w, wd = rng.randn(6, 2, *(3,) * nd_), rng.randn(4, 3, *(2,) * nd_)
    to_last = CHANNELS_LAST[nd_ + 2]
    ops = {
        "conv": (lambda x, w, layout: nd.Convolution(x, w, kernel=(3,) * nd_, stride=2,
                                                     pad=1, num_filter=6, num_group=2,
                                                     layout=layout), w),
        "deconv": (lambda x, w, layout: nd.Deconvolution(x, w, kernel=(2,) * nd_, stride=2,
                                                         adj=1, num_filter=3, layout=layout),
                   wd),
        "maxpool": (lambda x, w, layout: nd.Pooling(x, kernel=(3,) * nd_, stride=2, pad=1,
                                                    pooling_convention="full",
                                                    layout=layout) + w.sum(), w),
        "avgpool": (lambda x, w, layout: nd.Pooling(x, kernel=(2,) * nd_, stride=1, pad=1,
                                                    pool_type="avg", count_include_pad=False,
                                                    layout=layout) + w.sum(), w),
    }
    for name, (op, weight) in ops.items():
        ref = _grads(lambda x, w, op=op: op(x, w, first), x, weight)
        got = _grads(lambda x, w, op=op: op(x, w, last), x.transpose(to_last),
                     weight.transpose(to_last))
        back = np.argsort(to_last)
        for r, g, axes in zip(ref, got, (back, back, back), strict=True):
            np.testing.assert_allclose(g.transpose(axes), r, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{name} {last}")


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_conv3d_gradients_are_exact(layout):
    last = layout == "NDHWC"
    x = rng.randn(2, 4, 4, 5, 3) if not last else rng.randn(2, 4, 5, 3, 4)
    w = rng.randn(4, 2, 2, 3, 2) if not last else rng.randn(4, 2, 3, 2, 2)
    check_grad(lambda x, w, b: nd.Convolution(x, w, b, kernel=(2, 3, 2), stride=(1, 2, 1),
                                              dilate=(2, 1, 1), pad=(1, 1, 0), num_filter=4,
                                              num_group=2, layout=layout),
               [x, w, rng.randn(4)])


@pytest.mark.parametrize("nd_", [1, 2, 3])
def test_dilated_deconvolution_is_the_adjoint_of_convolution(nd_):
    """<deconv(x, w), y> == <x, conv(y, w)> for the same kernel, stride, dilation, pad."""
    geometry = {"kernel": (3,) * nd_, "stride": (2,) * nd_, "dilate": (2,) * nd_,
                "pad": (1,) * nd_}
    x = rng.randn(2, 4, *(4,) * nd_)
    w = rng.randn(4, 3, *(3,) * nd_)  # deconv: (in=4, out=3); conv from 3 back to 4
    up = nd.Deconvolution(nd.array(x), nd.array(w), num_filter=3, **geometry).asnumpy()
    y = rng.randn(*up.shape)
    down = nd.Convolution(nd.array(y), nd.array(w), num_filter=4, no_bias=True,
                          **geometry).asnumpy()
    assert down.shape == x.shape
    np.testing.assert_allclose((up * y).sum(), (x * down).sum(), rtol=1e-4)


def test_target_shape_sets_pad_and_adj_as_mxnet_infers_them():
    # MXNet: total = stride·(in-1) + dilated kernel - target; pad = ceil(total/2), adj = total % 2
    x, w = nd.array(rng.randn(1, 4, 9, 8)), nd.array(rng.randn(4, 3, 3, 2))
    y = nd.Deconvolution(x, w, kernel=(3, 2), stride=(2, 2), pad=(5, 5), target_shape=(16, 14),
                         num_filter=3)
    ref = nd.Deconvolution(x, w, kernel=(3, 2), stride=(2, 2), pad=(2, 1), adj=(1, 0),
                           num_filter=3)
    assert y.shape == (1, 3, 16, 14)
    np.testing.assert_array_equal(y.asnumpy(), ref.asnumpy())


def test_deconvolution_gradients_are_exact():
    check_grad(lambda x, w, b: nd.Deconvolution(x, w, b, kernel=(3, 2), stride=(2, 3),
                                                dilate=(1, 2), pad=(1, 1), adj=(1, 2),
                                                num_filter=4, num_group=2, no_bias=False),
               [rng.randn(2, 4, 3, 4), rng.randn(4, 2, 3, 2), rng.randn(4)])


def test_pooling_gradients_are_exact_in_ceil_mode():
    x = rng.permutation(2 * 3 * 5 * 7).reshape(2, 3, 5, 7).astype(np.float64)  # no ties
    for kind in ("max", "avg"):
        check_grad(lambda x, kind=kind: nd.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1),
                                                   pool_type=kind, pooling_convention="full",
                                                   count_include_pad=False), [x])


def test_outputs_are_views_of_channels_last_results():
    x = nd.array(rng.randn(2, 3, 6, 6).astype(np.float32))
    y = nd.Convolution(x, nd.ones((5, 3, 3, 3)), kernel=(3, 3), num_filter=5, no_bias=True)
    # channels innermost in memory: the next layer's im2col reads contiguous channel runs
    assert y.shape == (2, 5, 4, 4) and y.raw.strides[1] == 4
    z = nd.Pooling(nd.relu(y), kernel=(2, 2), stride=(2, 2))
    assert z.shape == (2, 5, 2, 2) and z.raw.strides[1] == 4


def test_shape_errors_name_the_problem():
    x = nd.ones((1, 4, 5, 5))
    with pytest.raises(ValueError, match="num_group"):
        nd.Convolution(x, nd.ones((6, 3, 3, 3)), kernel=(3, 3), num_filter=6, num_group=2)
    with pytest.raises(ValueError, match="larger than the padded input"):
        nd.Convolution(x, nd.ones((2, 4, 7, 7)), kernel=(7, 7), num_filter=2)
    with pytest.raises(ValueError, match="target_shape"):
        nd.Deconvolution(x, nd.ones((4, 2, 3, 3)), kernel=(3, 3), stride=(2, 2),
                         target_shape=(12, 12), num_filter=2)
    with pytest.raises(ValueError, match="layout"):
        nd.Pooling(x, kernel=(2, 2), layout="NCW")


@pytest.mark.parametrize("module", ["engine.ndarray.conv_windows", "engine.ndarray.pool_ops",
                                    "engine.ndarray.deconv_ops", "engine.ndarray.allocator",
                                    "engine.gluon.nn.pool_layers"])
def test_docstring_examples(module):
    import doctest
    import importlib

    assert doctest.testmod(importlib.import_module(module)).failed == 0


def test_training_steps_do_not_page_fault_for_their_temporaries():
    """Freed temporaries stay in the process (allocator.py): repeated steps of a small CNN
    touch no fresh pages once warm."""
    import resource

    from engine.ndarray import allocator

    if not allocator.keep_freed_memory():
        pytest.skip("malloc is not glibc's here")
    from engine import gluon

    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(16, 3, padding=1), gluon.nn.BatchNorm(), gluon.nn.Activation("relu"),
            gluon.nn.MaxPool2D(), gluon.nn.Conv2D(32, 3, padding=1), gluon.nn.BatchNorm(),
            gluon.nn.Activation("relu"), gluon.nn.GlobalAvgPool2D(), gluon.nn.Dense(10))
    net.initialize()
    x = nd.array(rng.randn(32, 3, 32, 32).astype(np.float32))

    def step():
        with autograd.record():
            y = net(x)
        y.backward()

    for _ in range(4):  # warm: also each engine thread's first products (OpenBLAS maps
        step()          # a buffer per thread on its first call, which faults once)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(3):
        step()
    # without the tuning glibc unmaps these temporaries: ~17,000 faults over the 3 steps
    assert resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before < 500


def _path_matches_the_others(monkeypatch, path, turn_off, run, tolerance):
    """``run()`` takes the convolution path ``conv_ops.<path>``, and gives the results it
    gives with that path turned off by ``turn_off()`` (within ``tolerance``)."""
    from engine.ndarray import conv_ops

    taken = []
    original = getattr(conv_ops, path)
    monkeypatch.setattr(conv_ops, path, lambda *a: taken.append(1) or original(*a))
    fast = run()
    assert taken, f"{path} was not taken"
    turn_off()
    for got, want in zip(fast, run(), strict=True):
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)


def _outputs_and_gradients(layout, size, kernel, pad, stride, dilate, bias, dtype):
    """A convolution of (4, 12, *size) data into 7 channels (fixed random arrays), and the
    gradients of its outputs weighted by channel: [y, gx, gw] (+ [gb] with ``bias``)."""
    c, f = 12, 7
    last = layout == "NHWC"
    seeded = np.random.RandomState(11)
    x = seeded.randn(4, *size, c) if last else seeded.randn(4, c, *size)
    w = seeded.randn(f, kernel, kernel, c) if last else seeded.randn(f, c, kernel, kernel)
    arrays = [nd.array(a, dtype=dtype) for a in (x, w, seeded.randn(f))]
    for a in arrays:
        a.attach_grad()
    with autograd.record():
        y = nd.Convolution(arrays[0], arrays[1], arrays[2] if bias else None,
                           kernel=(kernel, kernel), pad=(pad, pad), stride=(stride, stride),
                           dilate=(dilate, dilate), num_filter=f, no_bias=not bias,
                           layout=layout)
        weighted = (y * nd.array(np.arange(1, f + 1).reshape(
            (1, 1, 1, f) if last else (1, f, 1, 1)), dtype=dtype)).sum()
    weighted.backward()
    return [y.asnumpy()] + [a.grad.asnumpy() for a in arrays[:2 + bias]]


@pytest.mark.parametrize(("layout", "kernel", "pad", "stride", "dilate", "bias"), [
    ("NCHW", 3, 1, 1, 1, True), ("NHWC", 3, 1, 2, 1, False), ("NCHW", 5, 2, 1, 1, False),
    ("NCHW", 3, 2, 1, 2, True), ("NCHW", 1, 0, 1, 1, True)])
def test_one_pixel_maps_take_the_single_kernel_position(monkeypatch, layout, kernel, pad,
                                                        stride, dilate, bias):
    """ResNet's last stage on 32x32 images convolves 1x1 maps: the Dense product of the one
    kernel position that reads data gives im2col's outputs and gradients."""
    from engine.ndarray import conv_ops

    _path_matches_the_others(
        monkeypatch, "_single_tap_convolution",
        lambda: monkeypatch.setattr(conv_ops, "_single_tap", lambda *a: None),
        lambda: _outputs_and_gradients(layout, (1, 1), kernel, pad, stride, dilate, bias,
                                       "float32"), 1e-5)


def test_single_position_weight_passes_split_into_blocks_that_cover_every_filter():
    """The single-position path copies its weight slice and writes its gradient in blocks of
    filters on the engine's threads: blocks of about 1 MiB, in order, covering every filter."""
    from engine.ndarray import cpu_kernels

    w = np.empty((512, 512, 3, 3), np.float32)  # ResNet's last stage: 9.4 MB
    blocks = cpu_kernels.leading_blocks(w)
    assert len(blocks) == 10 and blocks[0][0] == 0 and blocks[-1][1] == 512
    assert all(a[1] == b[0] for a, b in itertools.pairwise(blocks))
    assert cpu_kernels.leading_blocks(np.empty((7, 12, 3, 3), np.float32)) == [(0, 7)]


@pytest.mark.parametrize(("layout", "size", "kernel", "pad", "stride", "dilate", "bias"), [
    ("NCHW", 2, 3, 1, 1, 1, True), ("NHWC", 2, 3, 1, 1, 1, False),
    ("NCHW", 2, 3, 1, 2, 1, False), ("NCHW", 3, 7, 3, 1, 1, True),
    ("NCHW", 2, 3, 2, 1, 2, True), ("NHWC", (1, 2), 3, 1, 1, 1, True)])
def test_maps_smaller_than_the_kernel_take_one_dense_product(monkeypatch, layout, size, kernel,
                                                             pad, stride, dilate, bias):
    """ResNet's last stage on 32x32 images convolves 2x2 maps by 3x3 kernels: the product
    with the layer's dense matrix gives im2col's outputs and gradients, in float64 to
    rounding, whatever the stride, dilation and padding (zero blocks included)."""
    from engine.ndarray import dense_map

    size = (size, size) if isinstance(size, int) else size
    _path_matches_the_others(  # in float64: the two paths agree to rounding
        monkeypatch, "_dense_map_convolution",
        lambda: monkeypatch.setattr(dense_map, "applies", lambda *a: False),
        lambda: _outputs_and_gradients(layout, size, kernel, pad, stride, dilate, bias,
                                       "float64"), 1e-12)


def test_dense_matrix_blocks_hold_the_one_kernel_position_joining_two_pixels():
    """Block (input pixel, output pixel) of D is the weights of the kernel position that
    takes the one to the other, transposed to (C, F); a pair no position joins is zeros."""
    from engine.ndarray import dense_map

    w = rng.randn(3, 2, 3, 3).astype(np.float32)
    plan = dense_map.Plan((2, 2), (1, 1), (3, 3), (2, 2), (1, 1), (1, 1))  # 2x2 → 1x1, s2
    assert plan.full and len(plan.pairs) == 4
    d = plan.matrix(w, None).T  # stored transposed
    assert d.shape == (4 * 2, 1 * 3)
    for p, (i, j) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)]):  # taps (1+i, 1+j)
        np.testing.assert_array_equal(d[2 * p:2 * p + 2], w[:, :, 1 + i, 1 + j].T)
    stale = np.full((3, 4 * 2), 7.0, np.float32)  # a kept buffer is written over whole
    np.testing.assert_array_equal(plan.matrix(w, stale).T, d)
    wide = dense_map.Plan((1, 3), (1, 3), (3, 3), (1, 1), (1, 1), (1, 1))
    assert not wide.full
    d = wide.matrix(w, np.full((3 * 3, 3 * 2), 7.0, np.float32)).T
    np.testing.assert_array_equal(d[0:2, 6:9], np.zeros((2, 3)))  # pixel 0 never reaches 2
    assert not dense_map.applies((3, 3), (3, 3)) and dense_map.applies((2, 2), (3, 3))


def test_dense_path_is_the_same_for_any_thread_count():
    """Its products are the engine's fixed-partition GEMMs: the same floats on 1-3 threads."""
    from engine.ndarray import kernel_threads

    x = nd.array(rng.randn(32, 256, 2, 2).astype(np.float32))
    w = nd.array(rng.randn(256, 256, 3, 3).astype(np.float32) * 0.05)

    def run():
        x.attach_grad()
        w.attach_grad()
        with autograd.record():
            y = nd.Convolution(x, w, kernel=(3, 3), pad=(1, 1), num_filter=256, no_bias=True)
        y.backward(nd.ones_like(y))
        return np.concatenate([a.asnumpy().ravel() for a in (y, x.grad, w.grad)])

    before = kernel_threads.count()
    try:
        results = []
        for count in (1, 2, 3):
            kernel_threads.set_count(count)
            results.append(run())
    finally:
        kernel_threads.set_count(before)
    assert all(r.tobytes() == results[0].tobytes() for r in results[1:])


def test_geometry_is_checked_on_every_call_and_list_arguments_still_work():
    # the geometry is worked out once per shapes and arguments: a failing one must fail
    # again (errors are not remembered), and unhashable (list) arguments take the same path
    x = nd.array(np.random.RandomState(0).rand(2, 3, 6, 6).astype(np.float32))
    w = nd.array(np.random.RandomState(1).rand(4, 3, 3, 3).astype(np.float32))
    for _ in range(2):
        with pytest.raises(ValueError, match="num_filter=5"):
            nd.Convolution(x, w, kernel=(3, 3), num_filter=5, no_bias=True)
    as_tuples = nd.Convolution(x, w, kernel=(3, 3), pad=(1, 1), num_filter=4, no_bias=True)
    as_lists = nd.Convolution(x, w, kernel=[3, 3], pad=[1, 1], num_filter=4, no_bias=True)
    assert as_tuples.shape == (2, 4, 6, 6)
    np.testing.assert_array_equal(as_lists.asnumpy(), as_tuples.asnumpy())
    with pytest.raises(ValueError, match="kernel"):
        nd.Convolution(x, w, kernel=[5, 5], num_filter=4, no_bias=True)
