"""Two CNN training steps, the engine side by side with MXNet 1.9.1 (hybridized) and PyTorch.

Networks (float32, CPU, SoftmaxCrossEntropy summed over the batch, Adam lr 1e-3):
- ``cnn``: Conv(32)-BN-ReLU-MaxPool, Conv(64)-BN-ReLU-MaxPool, Conv(128)-BN-ReLU,
  GlobalAvgPool, Dense(10); 3x3 convolutions with padding 1; batch 64 of 3x32x32
  (issue 11's network; target: engine <= 1.0x MXNet-hybridized).
- ``resnet18``: ResNet-18 v1 of BasicBlocks in the CIFAR ("thumbnail") form MXNet's model zoo
  builds with ``resnet18_v1(thumbnail=True)``: a 3x3 Conv(64)-BN-ReLU stem without max-pool,
  stages of 2 BasicBlocks with 64/128/256/512 channels (stride 2 and a 1x1 projection at the
  start of stages 2-4), GlobalAvgPool, Dense(10); 3x32x32 input, batch 16 by default (one
  step is ~10 GFLOP at that batch). Built here from HybridBlocks, the same source for the
  engine and MXNet. Target: engine <= 1.5x the faster of MXNet-hybridized and PyTorch.

Each round times every contender in turn (the anchors in their own venv processes), so a load
spike on the shared machine hits them alike; a contender's figure is the median ms/step over
all its timed steps, and the ratios compare those medians. ``--threads N`` caps every
contender's BLAS/OpenMP threads alike (bench/threads.py, default 1).

``--profile`` instead prints where the engine's hybridized step goes: ms per step in each
op's forward and backward, per input shape (every kernel of the compiled program is wrapped
with timers), and the rest ("other": loss, autograd bookkeeping, Adam).

Usage: python bench/engine_cnn.py [--nets cnn,resnet18] [--steps 10] [--rounds 3]
       [--threads 1] [--resnet-batch 16] [--profile]
"""

from __future__ import annotations

import argparse
import inspect
import os
import statistics
import sys
from contextlib import contextmanager

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from threads import cap_threads  # noqa: E402

THREADS = cap_threads()

import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anchors import anchor_python, run_in_anchor, stepper_code  # noqa: E402

LR = 1e-3
TARGETS = {"cnn": "engine <= 1.0x mxnet", "resnet18": "engine <= 1.5x min(mxnet, torch)"}


# ------------------------------------------------- networks (one source: engine and MXNet)
def build_cnn(nn):
    net = nn.HybridSequential()
    for channels, pool in ((32, True), (64, True), (128, False)):
        net.add(nn.Conv2D(channels, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"))
        if pool:
            net.add(nn.MaxPool2D())
    net.add(nn.GlobalAvgPool2D(), nn.Dense(10))
    return net


def build_resnet18(nn):
    class BasicBlock(nn.HybridBlock):
        def __init__(self, channels, stride, project, **kwargs):
            super().__init__(**kwargs)
            self.body = nn.HybridSequential()
            self.body.add(nn.Conv2D(channels, 3, stride, 1, use_bias=False), nn.BatchNorm(),
                          nn.Activation("relu"),
                          nn.Conv2D(channels, 3, 1, 1, use_bias=False), nn.BatchNorm())
            self.project = None
            if project:
                self.project = nn.HybridSequential()
                self.project.add(nn.Conv2D(channels, 1, stride, use_bias=False), nn.BatchNorm())

        def hybrid_forward(self, F, x):  # noqa: N803 - Gluon's signature
            residual = x if self.project is None else self.project(x)
            return F.Activation(self.body(x) + residual, act_type="relu")

    net = nn.HybridSequential()
    net.add(nn.Conv2D(64, 3, 1, 1, use_bias=False), nn.BatchNorm(), nn.Activation("relu"))
    for stage, channels in enumerate((64, 128, 256, 512)):
        stride = 1 if stage == 0 else 2
        net.add(BasicBlock(channels, stride, stage > 0), BasicBlock(channels, 1, False))
    net.add(nn.GlobalAvgPool2D(), nn.Dense(10))
    return net


BUILDERS = {"cnn": build_cnn, "resnet18": build_resnet18}


def make_data(batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((batch, 3, 32, 32)).astype(np.float32),
            "y": rng.integers(0, 10, batch).astype(np.float32)}


# ----------------------------------------------------------------------------- engine
def engine_step(net_name: str, data: dict[str, np.ndarray]):
    from engine import autograd, gluon, nd

    net = BUILDERS[net_name](gluon.nn)
    net.initialize(init="xavier")
    net.hybridize(static_alloc=True, static_shape=True)  # as the worker and the MXNet anchor
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": LR})
    x, y = nd.array(data["x"]), nd.array(data["y"])
    batch = data["x"].shape[0]

    def step():
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(batch)

    return step


def time_engine(step, steps: int) -> list[float]:
    step()
    step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return times


# ---------------------------------------------------------------------------- anchors
MXNET_SNIPPET = """
import time
import mxnet as mx
from mxnet import autograd, gluon, nd
BUILDER_SOURCE
net = BUILDER(gluon.nn)
net.initialize(init='xavier')
net.hybridize(static_alloc=True, static_shape=True)
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
trainer = gluon.Trainer(net.collect_params(), 'adam', {'learning_rate': LR})
x, y = nd.array(inputs['x']), nd.array(inputs['y'])
def step():
    with autograd.record():
        loss = loss_fn(net(x), y)
    loss.backward()
    trainer.step(x.shape[0])
    mx.nd.waitall()
step(); step()
times = []
for _ in range(STEPS):
    t0 = time.perf_counter(); step(); times.append(time.perf_counter() - t0)
result['seconds'] = times
result['version'] = mx.__version__
"""

TORCH_SNIPPET = """
import time
import torch
from torch import nn
torch.set_num_threads(THREADS)
def conv_bn(cin, cout, k, stride, bias):
    return [nn.Conv2d(cin, cout, k, stride, k // 2, bias=bias), nn.BatchNorm2d(cout)]
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = nn.Sequential(*conv_bn(cin, cout, 3, stride, False), nn.ReLU(),
                                  *conv_bn(cout, cout, 3, 1, False))
        self.project = nn.Sequential(*conv_bn(cin, cout, 1, stride, False)) if cin != cout else None
    def forward(self, x):
        residual = x if self.project is None else self.project(x)
        return torch.relu(self.body(x) + residual)
def build_cnn():
    layers, cin = [], 3
    for cout, pool in ((32, True), (64, True), (128, False)):
        layers += [*conv_bn(cin, cout, 3, 1, True), nn.ReLU()] + ([nn.MaxPool2d(2)] if pool else [])
        cin = cout
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))
def build_resnet18():
    layers, cin = [*conv_bn(3, 64, 3, 1, False), nn.ReLU()], 64
    for stage, cout in enumerate((64, 128, 256, 512)):
        layers += [BasicBlock(cin, cout, 1 if stage == 0 else 2), BasicBlock(cout, cout, 1)]
        cin = cout
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10))
net = build_NET()
x, y = torch.from_numpy(inputs['x']), torch.from_numpy(inputs['y']).long()
loss_fn = nn.CrossEntropyLoss(reduction='sum')
opt = torch.optim.Adam(net.parameters(), lr=LR)
def step():
    opt.zero_grad(set_to_none=False)
    loss_fn(net(x), y).backward()
    opt.step()
step(); step()
times = []
for _ in range(STEPS):
    t0 = time.perf_counter(); step(); times.append(time.perf_counter() - t0)
result['seconds'] = times
result['version'] = torch.__version__
"""

VERSIONS: dict[str, str] = {}


def anchor_code(name: str, net_name: str, threads: int, steps: int) -> str:
    """The anchor ``name``'s snippet: build ``net_name``, warm it up, time ``steps`` steps."""
    if name == "mxnet":
        builder = BUILDERS[net_name]
        code = (MXNET_SNIPPET.replace("BUILDER_SOURCE", inspect.getsource(builder))
                .replace("BUILDER", builder.__name__))
    else:
        code = TORCH_SNIPPET.replace("NET", net_name).replace("THREADS", str(threads))
    return code.replace("STEPS", str(steps)).replace("LR", repr(LR))


def anchor_stepper_code(name: str, net_name: str, threads: int) -> str:
    """The anchor's snippet for an ``anchors.AnchorStepper``: built, warmed up, ``step()``
    defined, its version in ``result``; no timing loop."""
    return stepper_code(anchor_code(name, net_name, threads, 0),
                        "mx" if name == "mxnet" else "torch")


def run_anchor(name: str, net_name: str, data, steps: int,
               threads: int | None = None) -> list[float] | None:
    threads = THREADS if threads is None else threads
    if anchor_python(name) is None:
        return None
    run = run_in_anchor(name, anchor_code(name, net_name, threads, steps), data, timeout=600,
                        threads=threads)
    VERSIONS[name] = str(run.json["version"])
    return [float(t) for t in run.json["seconds"]]


def measure(net_name: str, data, steps: int, rounds: int) -> dict[str, list[float]]:
    step = engine_step(net_name, data)
    times: dict[str, list[float]] = {"engine": [], "mxnet": [], "torch": []}
    for _ in range(rounds):
        times["engine"] += time_engine(step, steps)
        for name in ("mxnet", "torch"):
            secs = run_anchor(name, net_name, data, steps)
            if secs is not None:
                times[name] += secs
    return {name: ts for name, ts in times.items() if ts}


def report(net_name: str, batch: int, times: dict[str, list[float]]) -> None:
    labels = {"engine": "rudder engine", "mxnet": f"mxnet {VERSIONS.get('mxnet', '')} hybridized",
              "torch": f"pytorch {VERSIONS.get('torch', '')}"}
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"{net_name} (batch {batch}, target: {TARGETS[net_name]}):")
    for name, secs in medians.items():
        low, high = min(times[name]), max(times[name])
        print(f"  {labels[name]:<28} {secs * 1e3:8.1f} ms/step median "
              f"(min {low * 1e3:.1f}, max {high * 1e3:.1f}, {len(times[name])} steps)")
    for name in ("mxnet", "torch"):
        if name in medians:
            print(f"  engine / {name:<6} = {medians['engine'] / medians[name]:5.2f}")
        else:
            print(f"  {name}: not built (run bench/setup) - skipped")
    anchors = [medians[n] for n in ("mxnet", "torch") if n in medians]
    if anchors:
        print(f"  engine / faster anchor = {medians['engine'] / min(anchors):5.2f}")


def _kernel_label(kernel, run) -> str:
    """An op name, its first input's shape and its window geometry where it has one, e.g.
    ``Convolution(16, 64, 32, 32) k3 s2``."""
    step = getattr(kernel, "step", None)
    name = step.name if step is not None else type(kernel).__name__.removesuffix("Kernel")
    reads = kernel.reads()
    shape = tuple(run.values[reads[0]].shape) if reads and run.values[reads[0]] is not None \
        else ()
    geometry = ""
    for key, tag in (("kernel", "k"), ("stride", "s")):
        value = step.kwargs.get(key) if step is not None else None
        if value not in (None, ()):
            value = tuple(value) if isinstance(value, (list, tuple)) else (value,)
            geometry += f" {tag}{value[0] if len(set(value)) == 1 else value}"
    return f"{name}{shape}{geometry}"


@contextmanager
def wrapped_kernels(wrap):
    """Every hybridized-program kernel class's ``forward``/``backward`` replaced by
    ``wrap(method, "fwd" | "bwd")`` while the block runs (for the per-op profiles)."""
    from engine.gluon.hybrid import kernels, norm_kernels

    classes = [cls for module in (kernels, norm_kernels) for cls in vars(module).values()
               if isinstance(cls, type) and cls.__module__ == module.__name__
               and callable(getattr(cls, "forward", None))
               and callable(getattr(cls, "backward", None))]
    originals = {cls: (cls.forward, cls.backward) for cls in classes}
    for cls, (fwd, bwd) in originals.items():
        cls.forward, cls.backward = wrap(fwd, "fwd"), wrap(bwd, "bwd")
    try:
        yield
    finally:
        for cls, (fwd, bwd) in originals.items():
            cls.forward, cls.backward = fwd, bwd


def profile(net_name: str, data, steps: int, make_step=None) -> None:
    """Per-op forward/backward ms per step of the engine's hybridized training step
    (``make_step(net_name, data)``, by default this module's ``engine_step``).

    A hybridized block runs a compiled program of kernels (engine/gluon/hybrid/kernels.py
    and norm_kernels.py: fused ones, and a generic one that calls the ``engine.nd``
    operator); every kernel class's ``forward``/``backward`` is wrapped with timers,
    labelled by the op and its first input's shape. "other" is the rest of the step:
    loss, autograd bookkeeping, the optimizer. Each op gets its wall time and its CPU time
    (the whole process's: every engine thread's), so that other processes on a shared
    machine weigh less than in wall-clock time; with ``--threads N`` their ratio is how
    many threads the op kept busy ("par"), which says where more cores would not help.
    """
    from collections import defaultdict

    spent: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    labels: dict[int, str] = {}

    def timed(method, direction: str):
        def run_timed(kernel, run):
            if direction == "fwd":
                labels[id(kernel)] = _kernel_label(kernel, run)
            t0, c0 = time.perf_counter(), time.process_time()
            method(kernel, run)
            cell = spent[f"{labels.get(id(kernel), '?')} {direction}"]
            cell[0] += time.perf_counter() - t0
            cell[1] += time.process_time() - c0
        return run_timed

    with wrapped_kernels(timed):
        step = (make_step or engine_step)(net_name, data)
        step()
        step()
        spent.clear()
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(steps):
            step()
        cpu = (time.process_time() - c0) / steps
        wall = (time.perf_counter() - t0) / steps
    print(f"{net_name}: {wall * 1e3:.1f} ms/step wall, {cpu * 1e3:.1f} ms of CPU time "
          f"(mean of {steps}, hybridized, {THREADS} engine thread(s)), by op and input shape:")
    print(f"  {'op':<48} {'wall ms':>8} {'cpu ms':>8} {'par':>5}")
    for label, (w, c) in sorted(spent.items(), key=lambda item: -item[1][0]):
        print(f"  {label:<48} {w / steps * 1e3:8.2f} {c / steps * 1e3:8.2f} {c / w:5.2f}")
    rest_w = wall - sum(w for w, _ in spent.values()) / steps
    rest_c = cpu - sum(c for _, c in spent.values()) / steps
    print(f"  {'other':<48} {rest_w * 1e3:8.2f} {rest_c * 1e3:8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default="cnn,resnet18")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--resnet-batch", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS/OpenMP threads for every contender (see bench/threads.py)")
    parser.add_argument("--profile", action="store_true",
                        help="the engine's per-op time table instead of the comparison")
    args = parser.parse_args()
    if args.profile:
        for net_name in args.nets.split(","):
            profile(net_name, make_data(64 if net_name == "cnn" else args.resnet_batch),
                    args.steps)
        return
    print(f"{THREADS} thread(s) each, {os.cpu_count()} cores, {args.rounds} interleaved rounds "
          f"of {args.steps} steps")
    for net_name in args.nets.split(","):
        batch = 64 if net_name == "cnn" else args.resnet_batch
        data = make_data(batch)
        report(net_name, batch, measure(net_name, data, args.steps, args.rounds))


if __name__ == "__main__":
    main()
