"""Weight preparations queued ahead of their layers (engine.ndarray.weight_prep), and weight
gradients written straight into the Parameters' gradient buffers."""

from __future__ import annotations

import contextlib
import threading

import numpy as np
import pytest

from engine import autograd, gluon, nd
from engine.gluon import nn
from engine.ndarray import kernel_threads, weight_prep


@pytest.fixture
def two_threads():
    before = kernel_threads.count()
    kernel_threads.set_count(2)
    yield
    kernel_threads.set_count(before)


def _double(weight, out):
    out = np.empty_like(weight) if out is None else out
    np.multiply(weight, 2, out=out)
    return out


def test_outside_a_forward_a_layer_prepares_its_own_weight():
    w = np.arange(4.0)
    assert weight_prep.prepared("double", w, _double).tolist() == [0.0, 2.0, 4.0, 6.0]


def test_queued_preparations_fill_the_given_buffers_and_the_next_call_queues_them(
        two_threads):
    w = np.arange(6.0)
    with kernel_threads.deferring(), weight_prep.ahead([]) as first:
        made = weight_prep.prepared("double", w, _double)
        assert weight_prep.prepared("double", w, _double) is made  # asked twice: once made
    assert made.tolist() == (2 * w).tolist() and first.taken == 0
    (weight, recipe), = first.made  # one recipe per weight and kind
    assert weight is w and recipe.shape == (6,) and recipe.fits(np.zeros(6))
    assert not recipe.fits(np.zeros(7)) and not recipe.fits(np.zeros(6, np.float32))

    w2, out = np.arange(6.0) + 1, np.full(6, np.nan)
    with kernel_threads.deferring(), weight_prep.ahead([(recipe, w2, out)]) as second:
        got = weight_prep.prepared("double", w2, _double)
    assert got is out and out.tolist() == (2 * w2).tolist() and second.taken == 1


def test_a_preparation_no_thread_started_runs_on_the_layer_that_needs_it(two_threads):
    release, started = threading.Event(), threading.Event()
    ran_on: list[int] = []

    def block() -> None:  # keeps the one pool thread busy
        started.set()
        assert release.wait(10)

    def make(weight, out):
        ran_on.append(threading.get_ident())
        return _double(weight, out)

    w = np.ones(3)
    recipe = weight_prep.Made("double", make, (3,), w.dtype, (3,), w.dtype)
    with kernel_threads.deferring():
        kernel_threads.defer(block, np.zeros(1))
        assert started.wait(10)
        with weight_prep.ahead([(recipe, w, None)]) as forward:
            assert weight_prep.prepared("double", w, make).tolist() == [2.0] * 3
        release.set()
    assert ran_on == [threading.get_ident()] and forward.taken == 1


def test_a_failed_preparation_fails_the_layer_that_takes_it_and_only_that(two_threads):
    def broken(weight, out):
        raise ValueError("cannot prepare")

    w = np.ones(2)
    recipe = weight_prep.Made("broken", broken, (2,), w.dtype, (2,), w.dtype)
    with pytest.raises(ValueError, match="cannot prepare"):
        with kernel_threads.deferring(), weight_prep.ahead([(recipe, w, None)]):
            weight_prep.prepared("broken", w, broken)
    # queued but never asked for (the layers changed): the forward does not fail
    with kernel_threads.deferring(), weight_prep.ahead([(recipe, w, None)]) as forward:
        pass
    assert forward.taken == 0


def test_tickets_are_declined_where_deferral_is():
    before = kernel_threads.count()
    try:
        kernel_threads.set_count(2)
        assert kernel_threads.submit(lambda: 1) is None  # outside a block
        with kernel_threads.deferring():
            ticket = kernel_threads.submit(lambda: 7)
            assert ticket is not None and ticket.result() == 7
        kernel_threads.set_count(1)
        with kernel_threads.deferring():
            assert kernel_threads.submit(lambda: 1) is None
    finally:
        kernel_threads.set_count(before)


class _ConvPaths(nn.HybridBlock):
    """Every convolution path that prepares its weight or writes its weight gradient:
    im2col (a 3-channel image, whose weight it reads as stored, then two strided layers,
    whose weight rows it copies), Winograd F(4x4) and F(2x2), and a 3x3 convolution of
    1x1 maps (its one kernel position)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.HybridSequential()
        self.body.add(nn.Conv2D(64, 3, padding=1), nn.Activation("relu"),        # im2col
                      nn.Conv2D(64, 3, padding=1), nn.Activation("relu"),        # F(4x4) 8x8
                      nn.Conv2D(128, 3, strides=2, padding=1),                   # im2col
                      nn.Activation("relu"),
                      nn.Conv2D(128, 3, padding=1), nn.Activation("relu"),       # F(2x2) 4x4
                      nn.Conv2D(128, 3, strides=4, padding=1),                   # -> 1x1
                      nn.Conv2D(64, 3, padding=1),                               # one tap
                      nn.Dense(10))

    def hybrid_forward(self, F, x):  # noqa: N803 - Gluon's signature
        return self.body(x)


def _net_and_data(seed: int = 3):
    rng = np.random.default_rng(seed)
    net = _ConvPaths()
    net.initialize()
    x = nd.array(rng.standard_normal((32, 3, 8, 8)).astype(np.float32))
    net(x)
    for param in net.collect_params().values():
        param.set_data(nd.array(rng.standard_normal(param.shape).astype(np.float32) * 0.1))
    return net, x


def _steps(threads: int, hybridize: bool, monkeypatch, steps: int = 4):
    """Losses and final weights of SGD steps, and every hybridized forward's queue."""
    forwards: list[weight_prep.Forward] = []
    ahead = weight_prep.ahead

    @contextlib.contextmanager
    def watched(queue):
        with ahead(queue) as forward:
            yield forward
        forwards.append(forward)

    monkeypatch.setattr(weight_prep, "ahead", watched)
    before = kernel_threads.count()
    kernel_threads.set_count(threads)
    try:
        net, x = _net_and_data()
        if hybridize:
            net.hybridize(static_alloc=True, static_shape=True)
        trainer = gluon.Trainer(net.collect_params(), "sgd",
                                {"learning_rate": 0.05, "momentum": 0.9})
        out = []
        for _ in range(steps):
            with autograd.record():
                loss = (net(x) ** 2).mean()
            loss.backward()
            trainer.step(1)
            out.append(loss.asnumpy().tobytes())
        out += [p.data().asnumpy().tobytes() for p in net.collect_params().values()]
    finally:
        kernel_threads.set_count(before)
    return out, forwards


def test_a_hybridized_forward_takes_its_filter_transforms_from_the_queue_bit_identically(
        monkeypatch):
    reference, _ = _steps(1, False, monkeypatch)
    for threads in (1, 2, 3):
        got, forwards = _steps(threads, True, monkeypatch)
        assert got == reference, f"{threads} thread(s) differ from the imperative run"
        kinds = sorted(recipe.kind for _, recipe in forwards[-1].made)
        assert kinds == ["rows", "rows", "tap(1, 1)", "winograd2.U", "winograd4.U",
                         "winograd4.Ut"]
        # the first compiled call has nothing queued; from the next on, every preparation
        # comes from the queue where there is a spare thread
        taken = [forward.taken for forward in forwards]
        assert taken == [0] + [6 if threads > 1 else 0] * (len(taken) - 1)


def test_weight_gradients_written_into_the_parameters_buffers_equal_autograd_grad():
    for hybridize in (False, True):
        net, x = _net_and_data(seed=5)
        if hybridize:
            net.hybridize()
        params = list(net.collect_params().values())
        for _ in range(2):  # a hybridized block compiles its program on the second call
            with autograd.record():
                loss = (net(x) ** 2).mean()
            loss.backward()  # offers each Parameter's buffer to the layer that reads it
        written = [p.grad().asnumpy().copy() for p in params]
        with autograd.record():
            loss = (net(x) ** 2).mean()
        computed = autograd.grad(loss, [p.data() for p in params])  # no buffers offered
        for param, a, b in zip(params, written, computed, strict=True):
            assert a.tobytes() == b.asnumpy().tobytes(), param.name
            assert np.abs(a).sum() > 0, param.name
