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

import json
import os
import subprocess
import sys
import time
from pathlib import Path

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
def test_training_steps_are_bit_identical_on_1_2_and_3_threads(hybridize, optimizer,
                                                                every_kernel_parallel):
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


class _WeightInTheGraph(nn.HybridBlock):
    """A convolution whose weight is computed inside the graph (its gradient flows on to
    the multiply) and a Parameter read by two convolutions (its gradients are summed):
    the deferred weight gradients must be final before either reads them."""

    def __init__(self) -> None:
        super().__init__()
        self.scaled_weight = self.params.get("scaled_weight", shape=(32, 32, 3, 3))
        self.shared_weight = self.params.get("shared_weight", shape=(32, 32, 3, 3))
        self.stem = nn.Conv2D(32, 3, padding=1)

    def hybrid_forward(self, F, x, scaled_weight, shared_weight):  # noqa: N803 - Gluon's
        conv = dict(kernel=(3, 3), pad=(1, 1), num_filter=32, no_bias=True)
        y = F.relu(self.stem(x))
        y = F.relu(F.Convolution(y, scaled_weight * 0.5, **conv))
        y = F.relu(F.Convolution(y, shared_weight, **conv))
        return F.Convolution(y, shared_weight, **conv).mean(axis=(1, 2, 3))


@pytest.mark.parametrize("hybridize", [True, False])
def test_weight_gradients_read_inside_the_backward_are_final_on_every_thread_count(
        hybridize, monkeypatch):
    queue = kernel_threads._pool.defer

    def late(task):  # a deferred weight gradient that ends well after its layer's backward
        queue(lambda: (time.sleep(0.05), task()))

    monkeypatch.setattr(kernel_threads._pool, "defer", late)
    before = kernel_threads.count()
    rng = np.random.default_rng(31)
    x = nd.array(rng.standard_normal((16, 32, 16, 16)).astype(np.float32))
    values = None
    grads = {}
    try:
        for threads in (1, 2, 3):
            kernel_threads.set_count(threads)
            net = _WeightInTheGraph()
            net.initialize()
            if hybridize:
                net.hybridize()
            net(x)
            params = list(net.collect_params().values())
            if values is None:
                values = [rng.standard_normal(p.shape).astype(np.float32) * 0.1
                          for p in params]
            for param, value in zip(params, values, strict=True):
                param.set_data(nd.array(value))
            for _ in range(2):  # a hybridized block runs its compiled program from the
                with autograd.record():  # second recorded call on
                    loss = net(x).sum()
                loss.backward()
            grads[threads] = [p.grad().asnumpy() for p in params]
    finally:
        kernel_threads.set_count(before)
    for threads in (2, 3):
        for a, b in zip(grads[1], grads[threads], strict=True):
            assert a.tobytes() == b.tobytes()
    assert all(np.abs(g).sum() > 0 for g in grads[1])


def _fresh_process(imports: str, affinity: set[int] | None = None, **env: str) -> dict:
    """The engine's thread count, OpenBLAS's and the log line in a new interpreter."""
    code = (f"{imports}\nimport json, threadpoolctl, engine.threads\n"
            "from engine.ndarray import kernel_threads\n"
            "blas = [i['num_threads'] for i in threadpoolctl.threadpool_info()"
            " if i['internal_api'] == 'openblas']\n"
            "print(json.dumps({'count': kernel_threads.count(), 'blas': blas,"
            " 'described': engine.threads.describe(), 'log': globals().get('LOG')}))")
    environ = {k: v for k, v in os.environ.items() if k not in (
        "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RUDDER_ENGINE_THREADS", "NUMBA_NUM_THREADS")}
    environ.update(PYTHONPATH=str(Path(__file__).resolve().parents[2]), **env)
    out = subprocess.run(
        [sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=120,
        check=True, preexec_fn=None if affinity is None else
        (lambda: os.sched_setaffinity(0, affinity))).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_the_count_follows_the_cores_given_and_blas_stays_on_one_thread():
    one_core = {min(os.sched_getaffinity(0))}
    got = _fresh_process("import engine", affinity=one_core)
    assert got["count"] == 1 and "affinity mask" in got["described"], got
    got = _fresh_process("import numpy, engine", RUDDER_ENGINE_THREADS="3",
                         OPENBLAS_NUM_THREADS="4")  # numpy first, with 4 BLAS threads
    assert got["count"] == 3 and got["blas"] == [1], got


def test_a_worker_setting_sets_the_count_and_the_start_log_says_so():
    got = _fresh_process("import workers.tasks\nLOG = workers.tasks._ENGINE_THREADS",
                         RUDDER_WORKER_ENGINE_THREADS="3")
    assert got["count"] == 3, got
    assert got["log"] == "engine threads: 3 (RUDDER_WORKER_ENGINE_THREADS=3)"
    got = _fresh_process("import workers.tasks\nLOG = workers.tasks._ENGINE_THREADS",
                         OMP_NUM_THREADS="2")
    assert got["count"] == 2 and got["log"] == "engine threads: 2 (OMP_NUM_THREADS=2)", got
