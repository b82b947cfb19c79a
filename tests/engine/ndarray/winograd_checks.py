"""What the Winograd path tests share (test_winograd.py: F(2x2), test_winograd4.py: F(4x4)):
forcing a convolution algorithm, running one convolution with its gradients, and the checks
every algorithm must pass (NHWC = NCHW, hybridized = imperative bit for bit)."""

from __future__ import annotations

import numpy as np

from engine import autograd, gluon, nd
from engine.ndarray import winograd, winograd4


def force(monkeypatch, path: str) -> None:
    """Make every 3x3 stride-1 convolution take ``path``: "im2col", "F2", "F4" (whole
    layers) or "F4-blocks" (F(4x4) by blocks of one image, wherever there are two)."""
    monkeypatch.setattr(winograd, "MIN_HARMONIC_CHANNELS", 10 ** 9 if path == "im2col" else 1)
    monkeypatch.setattr(winograd, "MIN_TILES", 1)
    monkeypatch.setattr(winograd4, "MIN_TILES", 1 if path.startswith("F4") else 10 ** 9)
    image_blocks = winograd4.image_blocks
    if path == "F4-blocks":
        image_blocks = lambda plan, itemsize: (  # noqa: E731 - one image a block
            [(n, n + 1) for n in range(plan.n)] if plan.n > 1 else None)
    elif path == "F4":
        image_blocks = lambda plan, itemsize: None  # noqa: E731 - whole layers
    monkeypatch.setattr(winograd4, "image_blocks", image_blocks)


def run_convolution(x, w, b, pad, dtype, gy, layout=None):
    """Output and the gradients of <y, gy> for data, weight and bias, as numpy arrays."""
    arrs = [nd.array(a, dtype=dtype) for a in (x, w, b)]
    for a in arrs:
        a.attach_grad()
    with autograd.record():
        y = nd.Convolution(*arrs, kernel=(3, 3), pad=(pad, pad), num_filter=w.shape[0],
                           layout=layout)
    y.backward(nd.array(gy, dtype=dtype))
    return [y.asnumpy()] + [a.grad.asnumpy() for a in arrs]


def check_channels_last_equals_channels_first(rng, shape) -> None:
    """NHWC data and weights give the NCHW results (float64, 1e-12)."""
    x, w, b = rng.randn(*shape), rng.randn(4, shape[1], 3, 3), rng.randn(4)
    gy = rng.randn(shape[0], 4, *shape[2:])
    first = run_convolution(x, w, b, 1, np.float64, gy)
    last = run_convolution(x.transpose(0, 2, 3, 1), w.transpose(0, 2, 3, 1), b, 1, np.float64,
                           gy.transpose(0, 2, 3, 1), layout="NHWC")
    for a, c in zip(first, (last[0].transpose(0, 3, 1, 2), last[1].transpose(0, 3, 1, 2),
                            last[2].transpose(0, 3, 1, 2), last[3]), strict=True):
        np.testing.assert_allclose(c, a, rtol=1e-12, atol=1e-12)


def check_hybridized_step_is_bit_identical(rng, size: int) -> None:
    """A hybridized block replays nd.Convolution, with the forced path, bit for bit."""
    x = nd.array(rng.randn(2, 3, size, size).astype(np.float32))
    weights = None
    results = []
    for hybrid in (False, True):
        net = gluon.nn.HybridSequential()
        net.add(gluon.nn.Conv2D(5, 3, padding=1, in_channels=3), gluon.nn.Activation("relu"),
                gluon.nn.Conv2D(4, 3, padding=0, in_channels=5), gluon.nn.GlobalAvgPool2D())
        net.initialize()
        params = list(net.collect_params().values())
        weights = weights or [rng.randn(*p.shape).astype(np.float32) * 0.5 for p in params]
        for p, w in zip(params, weights, strict=True):
            p.set_data(nd.array(w))
        if hybrid:
            net.hybridize()
        for _ in range(2):  # the second call replays the traced program
            with autograd.record():
                y = net(x)
            y.backward()
        results.append([y.asnumpy()] + [p.grad().asnumpy() for p in params])
    for a, b in zip(*results, strict=True):
        np.testing.assert_array_equal(a, b)
