"""``Trainer.step`` alone: Adam on a 50-layer Dense(32) MLP (100 parameter tensors), CPU.

Compares, in one run: the engine's Trainer.step (one vectorized Adam over a contiguous
buffer), MXNet 1.9.1's gluon Trainer.step, and PyTorch 2.13's ``torch.optim.Adam.step``
(default settings, and ``foreach=True`` for information).

Each framework computes the gradients once; the loop then times the optimizer step alone.
Gluon refuses to step on gradients that backward has not refreshed, so the engine and MXNet
loops re-mark the gradients fresh before each step; that marking is timed on its own and
subtracted (both raw and net figures are printed).

Targets: engine >= 10x faster than MXNet, >= 5x faster than PyTorch's default Adam.step.
Usage: python bench/engine_step.py [--iters 300] [--repeats 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from threads import cap_threads  # noqa: E402

THREADS = cap_threads()

import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anchors import anchor_python, run_in_anchor  # noqa: E402

LAYERS, WIDTH, BATCH = 50, 32, 16


def time_it(step, iters: int, repeats: int) -> float:
    for _ in range(max(5, iters // 10)):
        step()
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        runs.append((time.perf_counter() - t0) / iters)
    return min(runs)


def engine_steps(x: np.ndarray):
    from engine import autograd, gluon, nd

    net = gluon.nn.Sequential()
    for _ in range(LAYERS):
        net.add(gluon.nn.Dense(WIDTH, in_units=WIDTH))
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 1e-3})
    with autograd.record():
        loss = net(nd.array(x)).sum()
    loss.backward()
    arrays = [a for p in trainer._params for a in p.list_data()]
    assert len(arrays) == 2 * LAYERS

    def mark():
        for a in arrays:
            a._fresh_grad = True

    def step():
        mark()
        trainer.step(BATCH)

    return step, mark


MXNET_SNIPPET = """
import time, statistics
import mxnet as mx
from mxnet import autograd, gluon, nd
net = gluon.nn.HybridSequential()
for _ in range(LAYERS):
    net.add(gluon.nn.Dense(WIDTH, in_units=WIDTH))
net.initialize()
trainer = gluon.Trainer(net.collect_params(), 'adam', {'learning_rate': 1e-3})
with autograd.record():
    loss = net(nd.array(inputs['x'])).sum()
loss.backward()
arrays = [a for p in net.collect_params().values() for a in p.list_data()]
assert len(arrays) == 2 * LAYERS
def mark():
    for a in arrays:
        a._fresh_grad = True
def step():
    mark()
    trainer.step(BATCH)
def timed(fn):
    for _ in range(max(5, ITERS // 10)): fn()
    mx.nd.waitall()
    runs = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for _ in range(ITERS): fn()
        mx.nd.waitall()
        runs.append((time.perf_counter() - t0) / ITERS)
    return min(runs)
result['step'] = timed(step)
result['mark'] = timed(mark)
result['version'] = mx.__version__
"""

TORCH_SNIPPET = """
import time, statistics
import torch
torch.set_num_threads(THREADS)
net = torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)])
net(torch.from_numpy(inputs['x'])).sum().backward()
assert len(list(net.parameters())) == 2 * LAYERS
def timed(fn):
    for _ in range(max(5, ITERS // 10)): fn()
    runs = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for _ in range(ITERS): fn()
        runs.append((time.perf_counter() - t0) / ITERS)
    return min(runs)
result['default'] = timed(torch.optim.Adam(net.parameters(), lr=1e-3).step)
result['foreach'] = timed(torch.optim.Adam(net.parameters(), lr=1e-3, foreach=True).step)
result['version'] = torch.__version__
"""


def run_anchor(name: str, snippet: str, x: np.ndarray, iters: int, repeats: int):
    if anchor_python(name) is None:
        print(f"  {name:<28} not built (run bench/setup) — skipped")
        return None
    code = (snippet.replace("ITERS", str(iters)).replace("REPEATS", str(repeats))
            .replace("THREADS", str(THREADS)).replace("LAYERS", str(LAYERS))
            .replace("WIDTH", str(WIDTH)).replace("BATCH", str(BATCH)))
    return run_in_anchor(name, code, {"x": x}, timeout=600, threads=THREADS).json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3,
                        help="measure every contender once per round and keep the best")
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS/OpenMP threads for every contender (see bench/threads.py)")
    args = parser.parse_args()
    x = np.random.default_rng(0).standard_normal((BATCH, WIDTH)).astype(np.float32)
    print(f"Trainer.step, Adam, {LAYERS}-layer Dense({WIDTH}) MLP = {2 * LAYERS} parameter "
          f"tensors, {THREADS} thread(s) each, {os.cpu_count()} cores, "
          f"best of {args.rounds} rounds "
          f"(microseconds per step)")
    step, mark = engine_steps(x)
    engine, mxnet, torch_default, torch_foreach = [], [], [], []
    versions = {}
    for _ in range(args.rounds):
        raw = time_it(step, args.iters, args.repeats)
        engine.append(raw - time_it(mark, args.iters, args.repeats))
        mxr = run_anchor("mxnet", MXNET_SNIPPET, x, args.iters, args.repeats)
        if mxr:
            mxnet.append(mxr["step"] - mxr["mark"])
            versions["mxnet"] = mxr["version"]
        tr = run_anchor("torch", TORCH_SNIPPET, x, args.iters, args.repeats)
        if tr:
            torch_default.append(tr["default"])
            torch_foreach.append(tr["foreach"])
            versions["torch"] = tr["version"]
    t_engine = min(engine)
    print(f"  {'rudder engine':<28} {t_engine * 1e6:9.1f} us")
    if mxnet:
        print(f"  {'mxnet ' + versions['mxnet']:<28} {min(mxnet) * 1e6:9.1f} us")
    if torch_default:
        print(f"  {'torch ' + versions['torch'] + ' Adam':<28} {min(torch_default) * 1e6:9.1f} us")
        print(f"  {'torch Adam(foreach=True)':<28} {min(torch_foreach) * 1e6:9.1f} us")
    print("speed-up of the engine (higher is better):")
    if mxnet:
        print(f"  mxnet / engine   = {min(mxnet) / t_engine:7.1f}x   (target >= 10)")
    if torch_default:
        print(f"  pytorch / engine = {min(torch_default) / t_engine:7.1f}x   (target >= 5)")
        print(f"  pytorch foreach / engine = {min(torch_foreach) / t_engine:7.1f}x   "
              f"(information)")


if __name__ == "__main__":
    main()
