"""Overhead of the fit loops: ``Module.fit`` and the Gluon ``Estimator`` against
hand-written loops of forward / backward / step on the same model and data.

Each loop trains the same MLP for one epoch per round; rounds of all loops are
interleaved (so machine noise hits them alike) and the median epoch time is reported.

- ``gluon hand loop``: ``record → net → loss → backward → trainer.step`` plus the same
  metric updates (accuracy, mean loss) the Estimator makes; ``estimator`` is
  ``Estimator.fit`` with its default handlers on the same DataLoader.
- ``module hand loop``: ``forward_backward → update → update_metric`` over an
  NDArrayIter; ``Module.fit`` is the same module API driven by ``fit``.

Run: ``python bench/engine_fit.py [--rounds 7] [--ctx gpu --clock wall]``. Prints a table and a JSON
line; the targets are estimator ≤ 1.03 × gluon hand loop and Module.fit ≤ 1.03 × module
hand loop.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# before numpy: the engine picks OpenBLAS's kernels, as a worker does (engine/blas_kernels.py)
from engine import blas_kernels  # noqa: E402, F401

# isort: split
import numpy as np  # noqa: E402

import engine as mx  # noqa: E402
from engine import autograd, gluon  # noqa: E402
from engine.gluon import nn  # noqa: E402
from engine.gluon.estimator import Estimator  # noqa: E402

FEATURES, HIDDEN, CLASSES = 256, 512, 10


def make_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, FEATURES)).astype(np.float32)
    y = x[:, :CLASSES].argmax(1).astype(np.float32)
    return x, y


def gluon_net(ctx: mx.Context) -> nn.HybridSequential:
    net = nn.HybridSequential()
    net.add(nn.Dense(HIDDEN, activation="relu"), nn.Dense(HIDDEN, activation="relu"),
            nn.Dense(CLASSES))
    net.initialize(mx.init.Xavier(), ctx=ctx)
    return net


def module_symbol() -> mx.sym.Symbol:
    h = mx.sym.var("data")
    for i in range(2):
        h = mx.sym.Activation(mx.sym.FullyConnected(h, num_hidden=HIDDEN, name=f"fc{i}"),
                              act_type="relu")
    out = mx.sym.FullyConnected(h, num_hidden=CLASSES, name="out")
    return mx.sym.SoftmaxOutput(out, name="softmax")


OPT = {"learning_rate": 0.01, "momentum": 0.9}


class GluonSetup:
    def __init__(self, x: np.ndarray, y: np.ndarray, batch: int, ctx: mx.Context) -> None:
        mx.random.seed(0)
        self.ctx = ctx
        self.loader = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=batch)
        self.net = gluon_net(ctx)
        self.loss = gluon.loss.SoftmaxCrossEntropyLoss()
        self.trainer = gluon.Trainer(self.net.collect_params(), "sgd", OPT)
        self.metrics = [mx.metric.Accuracy(), mx.metric.Loss()]
        self.estimator = Estimator(self.net, self.loss, trainer=self.trainer, context=ctx,
                                   train_metrics=[mx.metric.Accuracy(), mx.metric.Loss()])

    def hand_loop(self, with_metrics: bool = True) -> None:
        acc, mean_loss = self.metrics
        for m in self.metrics:
            m.reset()
        for data, label in self.loader:
            data, label = data.as_in_context(self.ctx), label.as_in_context(self.ctx)
            with autograd.record():
                out = self.net(data)
                loss = self.loss(out, label)
            loss.backward()
            self.trainer.step(data.shape[0])
            if with_metrics:
                acc.update([label], [out])
                mean_loss.update(0, [loss])

    def estimator_fit(self) -> None:
        self.estimator.fit(self.loader, epochs=1)


class ModuleSetup:
    def __init__(self, x: np.ndarray, y: np.ndarray, batch: int, ctx: mx.Context) -> None:
        mx.random.seed(0)
        self.iter = mx.io.NDArrayIter(x, y, batch_size=batch, label_name="softmax_label")
        self.mod = mx.mod.Module(module_symbol(), context=ctx)
        self.mod.bind(data_shapes=self.iter.provide_data, label_shapes=self.iter.provide_label)
        self.mod.init_params(mx.init.Xavier())
        self.mod.init_optimizer(optimizer="sgd", optimizer_params=OPT)
        self.metric = mx.metric.Accuracy()

    def hand_loop(self) -> None:
        self.iter.reset()
        self.metric.reset()
        for batch in self.iter:
            self.mod.forward_backward(batch)
            self.mod.update()
            self.mod.update_metric(self.metric, batch.label)

    def fit(self) -> None:
        self.iter.reset()
        self.mod.fit(self.iter, num_epoch=1, eval_metric=self.metric)


def measure(loops: dict[str, Callable[[], None]], rounds: int,
            clock: Callable[[], float] = time.perf_counter) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in loops}
    for fn in loops.values():  # warm-up: allocations, first-call costs
        fn()
    order = list(loops.items())
    for r in range(rounds):
        # alternate the order so a slow spell on the shared machine hits every loop alike
        for name, fn in (order if r % 2 == 0 else order[::-1]):
            mx.nd.waitall()
            started = clock()
            fn()
            mx.nd.waitall()
            times[name].append(clock() - started)
    return times


def main() -> int:
    global HIDDEN
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--samples", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--ctx", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="cpu: this process's CPU time (steadier on a shared machine; "
                             "single-threaded BLAS); wall: elapsed time (use on a GPU)")
    parser.add_argument("--hidden", type=int, default=512,
                        help="hidden width (small widths expose per-batch loop overhead)")
    args = parser.parse_args()
    HIDDEN = args.hidden
    logging.disable(logging.WARNING)  # keep fit's INFO/WARNING lines out of the timing
    ctx = mx.gpu() if args.ctx == "gpu" else mx.cpu()
    x, y = make_data(args.samples)
    g = GluonSetup(x, y, args.batch, ctx)
    m = ModuleSetup(x, y, args.batch, ctx)
    loops = {
        "gluon hand loop (no metrics)": lambda: g.hand_loop(with_metrics=False),
        "gluon hand loop": g.hand_loop,
        "estimator": g.estimator_fit,
        "module hand loop": m.hand_loop,
        "Module.fit": m.fit,
    }
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    times = measure(loops, args.rounds, clock)
    median = {name: statistics.median(t) for name, t in times.items()}
    best = {name: min(t) for name, t in times.items()}
    batches = -(-args.samples // args.batch)
    print(f"{args.samples} samples, batch {args.batch} ({batches} batches/epoch), "
          f"MLP {FEATURES}-{HIDDEN}-{HIDDEN}-{CLASSES}, ctx {ctx}, {args.rounds} rounds, "
          f"{args.clock} clock")
    print(f"{'loop':32s} {'median s/epoch':>15s} {'best s/epoch':>13s} {'ms/batch':>9s}")
    for name, sec in median.items():
        print(f"{name:32s} {sec:15.4f} {best[name]:13.4f} {1000 * sec / batches:9.3f}")
    pairs = {
        "estimator / gluon hand loop": ("estimator", "gluon hand loop"),
        "Module.fit / module hand loop": ("Module.fit", "module hand loop"),
        "Module.fit / gluon hand loop": ("Module.fit", "gluon hand loop"),
        "gluon metrics cost": ("gluon hand loop", "gluon hand loop (no metrics)"),
    }
    ratios = {}
    print(f"{'ratio':32s} {'median':>8s} {'best':>8s}")
    for label, (a, b) in pairs.items():
        ratios[label] = {"median": median[a] / median[b], "best": best[a] / best[b]}
        print(f"{label:32s} {ratios[label]['median']:7.3f}x {ratios[label]['best']:7.3f}x")
    print(json.dumps({"median_s": median, "best_s": best, "ratios": ratios, "ctx": str(ctx),
                      "samples": args.samples, "batch": args.batch, "hidden": HIDDEN,
                      "clock": args.clock}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
