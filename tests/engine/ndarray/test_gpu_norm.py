"""Training BatchNorm of float32 data on the GPU (engine.ndarray.gpu_norm, four kernel
launches) against the CPU engine: output, running statistics and every gradient, for
channels first and last, 2-, 3- and 4-D data, with and without fix_gamma."""

from __future__ import annotations

import numpy as np
import pytest

from engine import autograd, backend, nd
from engine.ndarray import gpu_norm

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(backend.gpu_count() == 0, reason="needs cupy and a CUDA GPU")]

SHAPES = {"nchw": ((8, 16, 10, 12), 1), "nhwc": ((8, 10, 12, 16), -1),
          "dense": ((64, 32), 1), "ncw": ((4, 6, 7), 1), "one_row_per_channel": ((1, 5, 1, 1), 1)}


def _train(ctx, x, gamma, beta, axis, fix_gamma):
    args = [nd.array(a, ctx=ctx, dtype="float32") for a in (x, gamma, beta)]
    channels = gamma.shape[0]
    rm = nd.array(np.full(channels, 0.5), ctx=ctx, dtype="float32")
    rv = nd.array(np.full(channels, 2.0), ctx=ctx, dtype="float32")
    for a in args:
        a.attach_grad()
    head = np.random.default_rng(9).uniform(0.5, 1.5, x.shape).astype("float32")
    with autograd.record(train_mode=True):
        y = nd.BatchNorm(*args, rm, rv, eps=1e-3, momentum=0.8, fix_gamma=fix_gamma,
                         axis=axis)
    y.backward(nd.array(head, ctx=ctx, dtype="float32"))
    if ctx.device_type == "gpu":
        assert gpu_norm.applies(args[0].raw, args[1].raw, rm.raw, rv.raw)
    return [y.asnumpy(), rm.asnumpy(), rv.asnumpy(), *(a.grad.asnumpy() for a in args)]


@pytest.mark.parametrize("fix_gamma", [False, True])
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_fused_gpu_batchnorm_matches_the_cpu(name: str, fix_gamma: bool) -> None:
    from engine.context import cpu, gpu

    shape, axis = SHAPES[name]
    rng = np.random.default_rng(len(name))
    channels = shape[axis]
    x = rng.normal(3.0, 2.0, shape).astype("float32")  # an offset mean tests the variance
    gamma = rng.uniform(0.5, 1.5, channels).astype("float32")
    beta = rng.standard_normal(channels).astype("float32")
    got = _train(gpu(0), x, gamma, beta, axis, fix_gamma)
    want = _train(cpu(), x, gamma, beta, axis, fix_gamma)
    names = ("output", "running mean", "running var", "data grad", "gamma grad", "beta grad")
    for what, a, e in zip(names, got, want, strict=True):
        scale = float(np.abs(e).max()) if e.size else 0.0
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5 * scale, err_msg=what)
    if fix_gamma:
        np.testing.assert_array_equal(got[4], 0)
