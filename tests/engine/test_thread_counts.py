"""Training gives the same bytes on 1, 2 or 3 engine threads (engine.ndarray.kernel_threads).

A job checkpointed on one machine and resumed on another with a different core count must
continue bit for bit, so every kernel and product on the training path splits its work into
blocks fixed by the shapes. The network below reaches each of them: the kernel-major im2col
input layer (its weight gradient summed over blocks of rows), im2col by row blocks, Winograd
F(4x4) and F(2x2), BatchNorm with a fused ReLU and 2x2 max-pool, a residual add+ReLU, Dense
layers, the loss, and the SGD-momentum and Adam updates; hybridized (the fused program
kernels) and imperative (the separate ops).
"""

from __future__ import annotations

import numpy as np
import pytest

from engine import autograd, gluon, nd
from engine.gluon import nn
from engine.ndarray import kernel_threads, winograd, winograd4

BATCH = 8


class _Net(nn.HybridBlock):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.HybridSequential()
        self.stem.add(nn.Conv2D(16, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"),
                      nn.MaxPool2D(),                                   # 48 -> 24
                      nn.Conv2D(64, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"))
        self.body = nn.HybridSequential()
        self.body.add(nn.Conv2D(64, 3, padding=1), nn.BatchNorm())
        self.head = nn.HybridSequential()
        self.head.add(nn.MaxPool2D(),                                   # 24 -> 12
                      nn.Conv2D(64, 3), nn.Activation("relu"),          # F(4x4): 12 -> 10
                      nn.Conv2D(64, 3), nn.Activation("relu"),          # F(2x2): 10 -> 8
                      nn.GlobalAvgPool2D(), nn.Dense(32, activation="relu"), nn.Dense(10))

    def hybrid_forward(self, F, x):  # noqa: N803 - Gluon's signature
        y = self.stem(x)
        return self.head(F.Activation(self.body(y) + y, act_type="relu"))


def _train(threads: int, hybridize: bool, optimizer: str, steps: int = 3) -> list[bytes]:
    kernel_threads.set_count(threads)
    rng = np.random.default_rng(29)
    net = _Net()
    net.initialize()
    if hybridize:
        net.hybridize()
    x = nd.array(rng.standard_normal((BATCH, 3, 48, 48)).astype(np.float32))
    label = nd.array(rng.integers(0, 10, BATCH).astype(np.float32))
    net(x)  # shapes known: the parameters exist before the seeded values go in
    for param in net.collect_params().values():  # in the order the layers made them
        param.set_data(nd.array(rng.standard_normal(param.shape).astype(np.float32) * 0.1))
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    extra = {"momentum": 0.9} if optimizer == "sgd" else {}
    trainer = gluon.Trainer(net.collect_params(), optimizer,
                            {"learning_rate": 0.01, "wd": 1e-4, **extra})
    out = []
    for _ in range(steps):
        with autograd.record():
            loss = loss_fn(net(x), label)
        loss.backward()
        trainer.step(BATCH)
        out.append(loss.asnumpy().tobytes())
    out += [p.data().asnumpy().tobytes() for p in net.collect_params().values()]
    return out


@pytest.mark.parametrize(("hybridize", "optimizer"), [(True, "sgd"), (False, "adam")])
def test_training_steps_are_bit_identical_on_1_2_and_3_threads(hybridize, optimizer):
    assert winograd.WINOGRAD == "4x4" and winograd4.MIN_TILES == 64  # the paths named above
    before = kernel_threads.count()
    try:
        runs = {threads: _train(threads, hybridize, optimizer) for threads in (1, 2, 3)}
    finally:
        kernel_threads.set_count(before)
    assert kernel_threads.parallel_kernels(), "the kernels' parallel builds did not run"
    for threads in (2, 3):
        same = [a == b for a, b in zip(runs[1], runs[threads], strict=True)]
        assert all(same), f"{threads} threads differ from 1 in arrays {same.index(False)}+"
