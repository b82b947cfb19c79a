"""Full training step (forward + backward + Adam step) of a 784-256-256-10 MLP, side by side.

Batch 128, float32, CPU, relu. Measured in one run on the same data:
- the engine: gluon.nn Dense layers + SoftmaxCrossEntropyLoss under autograd.record, then
  ``Trainer.step`` with Adam (parameters live in one contiguous buffer),
- hand-written numpy doing the same math (per-parameter Adam, in place, no temporaries),
- MXNet 1.9.1 (hybridized, static_alloc) and PyTorch 2.13 CPU when `bench/setup` built them.

Targets: engine <= 1.0x MXNet, <= 1.0x PyTorch, <= 1.15x numpy.
Usage: python bench/engine_train.py [--iters 50] [--repeats 5] [--rounds 3]
(unset OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE for the run if the machine sets them)
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

BATCH, SIZES = 128, (784, 256, 256, 10)
LR, BETA1, BETA2, EPS = 1e-3, 0.9, 0.999, 1e-8


def make_data(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    data = {"x": rng.standard_normal((BATCH, SIZES[0])).astype(np.float32),
            "y": rng.integers(0, SIZES[-1], BATCH).astype(np.float32)}
    for i, (n_in, n_out) in enumerate(zip(SIZES[:-1], SIZES[1:], strict=True)):
        bound = np.sqrt(6 / (n_in + n_out))
        data[f"w{i}"] = rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32)
        data[f"b{i}"] = np.zeros(n_out, np.float32)
    return data


def time_it(step, iters: int, repeats: int) -> float:
    """Best (minimum) seconds per iteration over ``repeats`` runs of ``iters`` iterations:
    on a shared machine the minimum is the run least disturbed by other load."""
    for _ in range(max(5, iters // 10)):
        step()
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        runs.append((time.perf_counter() - t0) / iters)
    return min(runs)


def numpy_train_step(d: dict[str, np.ndarray]):
    """Forward, backward (summed CE, as Gluon's loss) and 1.x Adam with rescale 1/batch."""
    x, y = d["x"], d["y"].astype(np.int64)
    params = [d[k].copy() for k in ("w0", "b0", "w1", "b1", "w2", "b2")]
    moments = [(np.zeros_like(p), np.zeros_like(p)) for p in params]
    rows = np.arange(BATCH)
    count = [0]

    scratch = [np.empty_like(p) for p in params], [np.empty_like(p) for p in params]

    def adam(p, g, m, v, G, tmp, t):
        # In place, into preallocated temporaries: the fastest plain-numpy Adam.
        np.multiply(g, 1.0 / BATCH, out=G)
        m *= BETA1
        np.multiply(G, 1 - BETA1, out=tmp)
        m += tmp
        v *= BETA2
        np.multiply(G, G, out=tmp)
        tmp *= 1 - BETA2
        v += tmp
        lr_t = LR * np.sqrt(1 - BETA2 ** t) / (1 - BETA1 ** t)
        np.sqrt(v, out=tmp)
        tmp += EPS
        np.divide(m, tmp, out=tmp)
        tmp *= lr_t
        p -= tmp

    def step():
        w0, b0, w1, b1, w2, b2 = params
        h1 = x @ w0.T + b0
        a1 = np.maximum(h1, 0)
        h2 = a1 @ w1.T + b1
        a2 = np.maximum(h2, 0)
        z = a2 @ w2.T + b2
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        s = e.sum(axis=1, keepdims=True)
        loss = np.log(s[:, 0]) - z[rows, y]
        g = e / s
        g[rows, y] -= 1
        gw2, gb2 = g.T @ a2, g.sum(0)
        g2 = (g @ w2) * (h2 > 0)
        gw1, gb1 = g2.T @ a1, g2.sum(0)
        g1 = (g2 @ w1) * (h1 > 0)
        gw0, gb0 = g1.T @ x, g1.sum(0)
        count[0] += 1
        grads = (gw0, gb0, gw1, gb1, gw2, gb2)
        for p, grad, (m, v), G, tmp in zip(params, grads, moments, *scratch, strict=True):
            adam(p, grad, m, v, G, tmp, count[0])
        return loss

    return step


def engine_train_step(d: dict[str, np.ndarray]):
    from engine import autograd, gluon, nd

    net = gluon.nn.Sequential()
    net.add(gluon.nn.Dense(256, activation="relu", in_units=784),
            gluon.nn.Dense(256, activation="relu", in_units=256),
            gluon.nn.Dense(10, in_units=256))
    net.initialize()
    for i, layer in enumerate(net):
        layer.weight.set_data(nd.array(d[f"w{i}"]))
        layer.bias.set_data(nd.array(d[f"b{i}"]))
    net.hybridize()
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": LR})
    x, y = nd.array(d["x"]), nd.array(d["y"])

    def step():
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(BATCH)
        return loss

    return step


MXNET_SNIPPET = """
import time, statistics
import mxnet as mx
from mxnet import autograd, gluon, nd
net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(256, activation='relu', in_units=784),
        gluon.nn.Dense(256, activation='relu', in_units=256), gluon.nn.Dense(10, in_units=256))
net.initialize()
for i, layer in enumerate(net):
    layer.weight.set_data(nd.array(inputs['w%d' % i]))
    layer.bias.set_data(nd.array(inputs['b%d' % i]))
net.hybridize(static_alloc=True, static_shape=True)
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
trainer = gluon.Trainer(net.collect_params(), 'adam', {'learning_rate': LR})
x, y = nd.array(inputs['x']), nd.array(inputs['y'])
def step():
    with autograd.record():
        loss = loss_fn(net(x), y)
    loss.backward()
    trainer.step(BATCH)
    net[0].weight.data().wait_to_read()
for _ in range(max(5, ITERS // 10)): step()
runs = []
for _ in range(REPEATS):
    t0 = time.perf_counter()
    for _ in range(ITERS): step()
    mx.nd.waitall()
    runs.append((time.perf_counter() - t0) / ITERS)
result['seconds'] = min(runs)
result['version'] = mx.__version__
"""

TORCH_SNIPPET = """
import time, statistics
import torch
torch.set_num_threads(THREADS)
layers = [torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
          torch.nn.Linear(256, 10)]
net = torch.nn.Sequential(*layers)
with torch.no_grad():
    for i, lin in enumerate([layers[0], layers[2], layers[4]]):
        lin.weight.copy_(torch.from_numpy(inputs['w%d' % i]))
        lin.bias.copy_(torch.from_numpy(inputs['b%d' % i]))
x, y = torch.from_numpy(inputs['x']), torch.from_numpy(inputs['y']).long()
loss_fn = torch.nn.CrossEntropyLoss()
opt = torch.optim.Adam(net.parameters(), lr=LR)
def step():
    opt.zero_grad(set_to_none=False)
    loss = loss_fn(net(x), y)
    loss.backward()
    opt.step()
for _ in range(max(5, ITERS // 10)): step()
runs = []
for _ in range(REPEATS):
    t0 = time.perf_counter()
    for _ in range(ITERS): step()
    runs.append((time.perf_counter() - t0) / ITERS)
result['seconds'] = min(runs)
result['version'] = torch.__version__
"""


def run_anchor(name: str, snippet: str, data, iters: int, repeats: int) -> float | None:
    if anchor_python(name) is None:
        return None
    threads = THREADS
    code = (snippet.replace("ITERS", str(iters)).replace("REPEATS", str(repeats))
            .replace("THREADS", str(threads)).replace("BATCH", str(BATCH))
            .replace("LR", repr(LR)))
    run = run_in_anchor(name, code, data, timeout=600, threads=THREADS)
    VERSIONS[name] = str(run.json["version"])
    return float(run.json["seconds"])


VERSIONS: dict[str, str] = {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3,
                        help="measure every contender once per round and report the best "
                             "round (rounds interleave the contenders, so load on a shared "
                             "machine hits all of them alike)")
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS/OpenMP threads for every contender (see bench/threads.py)")
    args = parser.parse_args()
    data = make_data()
    print(f"MLP {'-'.join(map(str, SIZES))}, batch {BATCH}, float32, forward+backward+Adam, "
          f"{THREADS} thread(s) each, {os.cpu_count()} cores, {args.rounds} rounds")
    steps = {"hand-written numpy": numpy_train_step(data), "rudder engine": engine_train_step(data)}
    times: dict[str, list[float]] = {name: [] for name in [*steps, "mxnet", "torch"]}
    for _ in range(args.rounds):
        for name, step in steps.items():
            times[name].append(time_it(step, args.iters, args.repeats))
        for name, snippet in (("mxnet", MXNET_SNIPPET), ("torch", TORCH_SNIPPET)):
            secs = run_anchor(name, snippet, data, args.iters, args.repeats)
            if secs is not None:
                times[name].append(secs)
    med = {name: min(ts) for name, ts in times.items() if ts}
    for name, secs in med.items():
        label = f"{name} {VERSIONS[name]}" if name in VERSIONS else name
        spread = ", ".join(f"{t * 1e3:.2f}" for t in times[name])
        print(f"  {label:<22} {secs * 1e3:8.3f} ms/iter   (rounds: {spread})")
    for name in ("mxnet", "torch"):
        if name not in med:
            print(f"  {name:<22} not built (run bench/setup) — skipped")
    engine = med["rudder engine"]
    print("ratios (engine / anchor; lower is better):")
    print(f"  engine / numpy   = {engine / med['hand-written numpy']:6.3f}   (target <= 1.15)")
    if "mxnet" in med:
        print(f"  engine / mxnet   = {engine / med['mxnet']:6.3f}   (target <= 1.00)")
    if "torch" in med:
        print(f"  engine / pytorch = {engine / med['torch']:6.3f}   (target <= 1.00)")


if __name__ == "__main__":
    main()
