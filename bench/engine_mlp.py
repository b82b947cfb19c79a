"""A 784-256-256-10 MLP (relu, batch 128, float32, CPU), side by side with its anchors.

Two measurements, each on the same data and weights for every contender:
- ``fwd+bwd``: forward + backward (issue 11 target: engine <= 1.05x hand-written numpy),
- ``train``: forward + backward + Adam step (issue 11 targets: <= 0.8x MXNet 1.9.1
  hybridized, <= 2.5x the time of the step's matrix products alone).

Contenders: the engine hybridized (HybridSequential of Dense, ``hybridize(static_alloc=True,
static_shape=True)``, SoftmaxCrossEntropyLoss under autograd.record, then ``Trainer.step``),
the same engine imperative (not hybridized), hand-written numpy doing the same math
(in-place Adam into preallocated temporaries: a strong floor), ``gemm``: only the step's
eight matrix products into preallocated outputs (the BLAS floor), MXNet 1.9.1 (hybridized,
static_alloc) and PyTorch 2.13 when `bench/setup` has built them.

Each round times the in-process contenders interleaved (best of ``--repeats`` runs each),
then runs each anchor once; figures are the median over rounds and ratios are taken of
medians. ``--threads N`` caps every contender's BLAS/OpenMP threads alike
(see bench/threads.py).
Usage: python bench/engine_mlp.py [--iters 100] [--repeats 5] [--rounds 3] [--threads 1]
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anchors import anchor_python, run_in_anchor  # noqa: E402

BATCH, SIZES = 128, (784, 256, 256, 10)
LR, BETA1, BETA2, EPS = 1e-3, 0.9, 0.999, 1e-8
TARGETS = {"fwd+bwd": {"numpy": 1.05}, "train": {"mxnet": 0.8, "gemm": 2.5}}


def make_data(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    data = {"x": rng.standard_normal((BATCH, SIZES[0])).astype(np.float32),
            "y": rng.integers(0, SIZES[-1], BATCH).astype(np.float32)}
    for i, (n_in, n_out) in enumerate(zip(SIZES[:-1], SIZES[1:], strict=True)):
        bound = np.sqrt(6 / (n_in + n_out))
        data[f"w{i}"] = rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32)
        data[f"b{i}"] = np.zeros(n_out, np.float32)
    return data


def time_interleaved(steps: dict, iters: int, repeats: int) -> dict[str, float]:
    """Best seconds per iteration of each step, timed in alternating runs.

    The minimum, not the median: on a shared machine other processes only ever add time,
    and alternating the contenders makes a load spike hit them alike.
    """
    for step in steps.values():
        for _ in range(max(5, iters // 10)):
            step()
    best = {name: float("inf") for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            t0 = time.perf_counter()
            for _ in range(iters):
                step()
            best[name] = min(best[name], (time.perf_counter() - t0) / iters)
    return best


# ------------------------------------------------------------------ hand-written numpy
def numpy_step(d: dict[str, np.ndarray], adam: bool = False):
    """Forward, backward of the summed CE (as ``loss.backward()`` on a batch), and
    optionally 1.x Adam with rescale 1/batch, in place."""
    x, y = d["x"], d["y"].astype(np.int64)
    params = [d[k].copy() for k in ("w0", "b0", "w1", "b1", "w2", "b2")]
    rows = np.arange(BATCH)
    moments = [(np.zeros_like(p), np.zeros_like(p)) for p in params]
    scratch = [(np.empty_like(p), np.empty_like(p)) for p in params]
    count = [0]

    def adam_update(p, g, m, v, big_g, tmp, t):
        np.multiply(g, 1.0 / BATCH, out=big_g)
        m *= BETA1
        np.multiply(big_g, 1 - BETA1, out=tmp)
        m += tmp
        v *= BETA2
        np.multiply(big_g, big_g, out=tmp)
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
        grads = (gw0, gb0, gw1, gb1, gw2, gb2)
        if adam:
            count[0] += 1
            for p, grad, (m, v), (big_g, tmp) in zip(params, grads, moments, scratch,
                                                    strict=True):
                adam_update(p, grad, m, v, big_g, tmp, count[0])
        return loss, grads

    step.params = params  # type: ignore[attr-defined]
    return step


def gemm_step(d: dict[str, np.ndarray], adam: bool = False):
    """Only the matrix products of one step (3 forward, 3 weight-gradient, 2 input-gradient),
    into preallocated outputs: what BLAS alone needs. ``adam`` is ignored (no products)."""
    x = d["x"]
    ws = [d[f"w{i}"] for i in range(3)]
    hs = [np.empty((BATCH, w.shape[0]), np.float32) for w in ws]
    gws = [np.empty_like(w) for w in ws]
    gxs = [np.empty((BATCH, w.shape[1]), np.float32) for w in ws[1:]]

    def step():
        np.matmul(x, ws[0].T, out=hs[0])
        np.matmul(hs[0], ws[1].T, out=hs[1])
        np.matmul(hs[1], ws[2].T, out=hs[2])
        np.matmul(hs[2].T, hs[1], out=gws[2])
        np.matmul(hs[2], ws[2], out=gxs[1])
        np.matmul(gxs[1].T, hs[0], out=gws[1])
        np.matmul(gxs[1], ws[1], out=gxs[0])
        np.matmul(gxs[0].T, x, out=gws[0])

    return step


# ----------------------------------------------------------------------------- engine
def engine_step(d: dict[str, np.ndarray], adam: bool = False, hybridize: bool = True):
    from engine import autograd, gluon, nd

    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(256, activation="relu", in_units=784),
            gluon.nn.Dense(256, activation="relu", in_units=256),
            gluon.nn.Dense(10, in_units=256))
    net.initialize()
    for i, layer in enumerate(net):
        layer.weight.set_data(nd.array(d[f"w{i}"]))
        layer.bias.set_data(nd.array(d[f"b{i}"]))
    if hybridize:
        net.hybridize(static_alloc=True, static_shape=True)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": LR}) if adam else None
    x, y = nd.array(d["x"]), nd.array(d["y"])

    def step():
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        if trainer is not None:
            trainer.step(BATCH)
        return loss

    step.net = net  # type: ignore[attr-defined]
    return step


def check_same_math(data) -> None:
    """Refuse to time contenders that do not compute the same thing."""
    _, grads = numpy_step(data)()
    step = engine_step(data)
    step()
    got = step.net[0].weight.grad().asnumpy()
    np.testing.assert_allclose(got, grads[0], rtol=2e-3, atol=1e-4)
    numpy_train, engine_train = numpy_step(data, adam=True), engine_step(data, adam=True)
    for _ in range(3):
        numpy_train()
        engine_train()
    # after 3 Adam steps both must hold the same weights
    np.testing.assert_allclose(engine_train.net[2].weight.data().asnumpy(),
                               numpy_train.params[4], rtol=1e-3, atol=1e-5)


# ---------------------------------------------------------------------------- anchors
MXNET_SNIPPET = """
import time
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
    if ADAM:
        trainer.step(BATCH)
    net[0].weight.grad().wait_to_read()
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
import time
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
loss_fn = torch.nn.CrossEntropyLoss(reduction='sum')
opt = torch.optim.Adam(net.parameters(), lr=LR)
def step():
    opt.zero_grad(set_to_none=False)
    loss = loss_fn(net(x), y)
    loss.backward()
    if ADAM:
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

VERSIONS: dict[str, str] = {}


def run_anchor(name: str, data, adam: bool, iters: int, repeats: int) -> float | None:
    if anchor_python(name) is None:
        return None
    snippet = MXNET_SNIPPET if name == "mxnet" else TORCH_SNIPPET
    code = (snippet.replace("ITERS", str(iters)).replace("REPEATS", str(repeats))
            .replace("THREADS", str(THREADS)).replace("BATCH", str(BATCH))
            .replace("LR", repr(LR)).replace("ADAM", str(adam)))
    run = run_in_anchor(name, code, data, timeout=600, threads=THREADS)
    VERSIONS[name] = str(run.json["version"])
    return float(run.json["seconds"])


def measure(data, adam: bool, args) -> dict[str, list[float]]:
    steps = {"numpy": numpy_step(data, adam), "engine": engine_step(data, adam),
             "imperative": engine_step(data, adam, hybridize=False), "gemm": gemm_step(data)}
    times: dict[str, list[float]] = {name: [] for name in [*steps, "mxnet", "torch"]}
    for _ in range(args.rounds):
        for name, secs in time_interleaved(steps, args.iters, args.repeats).items():
            times[name].append(secs)
        for name in ("mxnet", "torch"):
            secs = run_anchor(name, data, adam, args.iters, args.repeats)
            if secs is not None:
                times[name].append(secs)
    return {name: ts for name, ts in times.items() if ts}


def report(title: str, times: dict[str, list[float]], targets: dict[str, float]) -> None:
    labels = {"numpy": "hand-written numpy", "engine": "rudder engine hybridized",
              "imperative": "rudder engine imperative", "gemm": "gemm only (BLAS floor)",
              "mxnet": f"mxnet {VERSIONS.get('mxnet', '')} hybridized",
              "torch": f"pytorch {VERSIONS.get('torch', '')}"}
    print(f"{title}:")
    median = {name: float(np.median(ts)) for name, ts in times.items()}
    for name, secs in median.items():
        spread = ", ".join(f"{t * 1e3:.2f}" for t in times[name])
        print(f"  {labels[name]:<32} {secs * 1e3:8.3f} ms/iter median   (rounds: {spread})")
    for name in ("mxnet", "torch"):
        if name not in median:
            print(f"  {name:<32} not built (run bench/setup) — skipped")
    for name in ("numpy", "imperative", "gemm", "mxnet", "torch"):
        if name in median:
            target = f"(target <= {targets[name]:.2f})" if name in targets else ""
            ratio = median["engine"] / median[name]
            print(f"  engine / {name:<10} = {ratio:6.3f}   {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS/OpenMP threads for every contender (see bench/threads.py)")
    parser.add_argument("--only", choices=("fwd+bwd", "train"))
    args = parser.parse_args()
    data = make_data()
    check_same_math(data)
    print(f"MLP {'-'.join(map(str, SIZES))}, batch {BATCH}, float32, {THREADS} thread(s) each, "
          f"{os.cpu_count()} cores, median of {args.rounds} rounds")
    for mode, adam in (("fwd+bwd", False), ("train", True)):
        if args.only in (None, mode):
            title = "forward+backward" if not adam else "forward+backward+Adam step"
            report(title, measure(data, adam, args), TARGETS[mode])


if __name__ == "__main__":
    main()
