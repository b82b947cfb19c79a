"""Training steps on one CUDA GPU: the engine on cupy side by side with PyTorch CUDA.

Run by hand on a machine with an NVIDIA GPU (after ``scripts/gpu-setup``); CI has none.
Contenders, float32 (PyTorch with TF32 off), same device, same process, each timed with the
device synchronized at the end of every timed run:
- ``mlp``: 784-256-256-10 relu MLP, batch 128, SoftmaxCrossEntropy summed, Adam step
  (issue 17 target: engine <= 2x PyTorch);
- ``cnn``: issue 11's Conv-BN-ReLU-Pool network (bench/engine_cnn.py), batch 64 of 3x32x32;
- ``resnet18``: the CIFAR ResNet-18 of bench/engine_cnn.py, batch ``--resnet-batch``
  (issue 17 target: engine <= 1.5x PyTorch);
- ``trainer``: ``Trainer.step`` alone, Adam over 100 tensors (a 50-layer Dense(32) MLP,
  bench/engine_step.py's), against ``torch.optim.Adam.step`` (default = foreach on CUDA)
  (issue 17 target: <= 0.3 ms).
The engine side is hybridized as in bench/engine_mlp.py / engine_cnn.py. Peak GPU memory of
the CNN steps: cupy's pool total after the timed steps (the pool keeps freed blocks, so it
holds the step's high-water mark) against ``torch.cuda.max_memory_reserved``.

Each round times every contender once (best of ``--repeats`` runs of ``--iters`` steps);
figures are medians over ``--rounds`` and ratios are ratios of medians.
Usage: python bench/gpu_step.py [--only mlp,cnn,resnet18,trainer] [--iters 50] [--rounds 3]
       [--resnet-batch 128] [--profile cnn] [--profile-ops resnet18 [--top 25]]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine_cnn import BUILDERS  # noqa: E402 - one network source for CPU and GPU benches

LR = 1e-3
TARGETS = {"mlp": 2.0, "cnn": 1.5, "resnet18": 1.5}


def timed(step, sync, iters: int, repeats: int) -> float:
    """Best seconds per step over ``repeats`` runs, the device drained before each clock."""
    for _ in range(3):
        step()
    sync()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        sync()
        best = min(best, (time.perf_counter() - t0) / iters)
    return best


# ----------------------------------------------------------------------------- engine
def engine_net_step(name: str, batch: int, seed: int = 0):
    from engine import autograd, gluon, nd
    from engine.context import gpu

    rng = np.random.default_rng(seed)
    ctx = gpu(0)
    if name == "mlp":
        net = gluon.nn.HybridSequential()
        net.add(gluon.nn.Dense(256, activation="relu", in_units=784),
                gluon.nn.Dense(256, activation="relu", in_units=256),
                gluon.nn.Dense(10, in_units=256))
        x = rng.standard_normal((batch, 784)).astype(np.float32)
    else:
        net = BUILDERS[name](gluon.nn)
        x = rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)
    net.initialize(init="xavier", ctx=ctx)
    net.hybridize(static_alloc=True, static_shape=True)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": LR})
    xs = nd.array(x, ctx=ctx)
    ys = nd.array(rng.integers(0, 10, batch).astype(np.float32), ctx=ctx)

    def step():
        with autograd.record():
            loss = loss_fn(net(xs), ys)
        loss.backward()
        trainer.step(batch)

    return step


def engine_trainer_step(layers: int = 50, width: int = 32):
    from engine import autograd, gluon, nd
    from engine.context import gpu

    ctx = gpu(0)
    net = gluon.nn.Sequential()
    for _ in range(layers):
        net.add(gluon.nn.Dense(width, in_units=width))
    net.initialize(ctx=ctx)
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": LR})
    x = np.random.default_rng(0).standard_normal((16, width)).astype(np.float32)
    with autograd.record():
        loss = net(nd.array(x, ctx=ctx)).sum()
    loss.backward()
    arrays = [a for p in trainer._params for a in p.list_data()]
    assert len(arrays) == 2 * layers

    def step():
        # Gluon refuses stale gradients; re-marking 100 flags costs ~10 us on the host
        for a in arrays:
            a._fresh_grad = True
        trainer.step(16)

    return step


def cupy_sync():
    import cupy

    cupy.cuda.Device().synchronize()


def cupy_pool_bytes(in_use: bool = False) -> int:
    """cupy's pool: everything it holds, or (``in_use``) what live arrays use of it."""
    import cupy

    pool = cupy.get_default_memory_pool()
    return int(pool.used_bytes() if in_use else pool.total_bytes())


def cupy_pool_reset() -> None:
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()


# ---------------------------------------------------------------------------- pytorch
def torch_net(name: str):
    import torch
    from torch import nn

    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                             nn.Linear(256, 10))
    if name == "cnn":
        layers: list = []
        c_in = 3
        for channels, pool in ((32, True), (64, True), (128, False)):
            layers += [nn.Conv2d(c_in, channels, 3, padding=1), nn.BatchNorm2d(channels),
                       nn.ReLU()]
            layers += [nn.MaxPool2d(2)] if pool else []
            c_in = channels
        return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))

    class Basic(nn.Module):
        def __init__(self, c_in, c_out, stride):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out),
                nn.ReLU(), nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False), nn.BatchNorm2d(c_out))
            self.project = None
            if stride != 1 or c_in != c_out:
                self.project = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False),
                                             nn.BatchNorm2d(c_out))

        def forward(self, x):
            residual = x if self.project is None else self.project(x)
            return torch.relu(self.body(x) + residual)

    blocks: list = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()]
    c_in = 64
    for stage, channels in enumerate((64, 128, 256, 512)):
        blocks += [Basic(c_in, channels, 1 if stage == 0 else 2), Basic(channels, channels, 1)]
        c_in = channels
    return nn.Sequential(*blocks, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10))


def torch_net_step(name: str, batch: int, seed: int = 0):
    import torch

    rng = np.random.default_rng(seed)
    shape = (batch, 784) if name == "mlp" else (batch, 3, 32, 32)
    net = torch_net(name).cuda()
    x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).cuda()
    y = torch.from_numpy(rng.integers(0, 10, batch)).cuda()
    loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")
    opt = torch.optim.Adam(net.parameters(), lr=LR)

    def step():
        opt.zero_grad(set_to_none=False)
        loss_fn(net(x), y).backward()
        opt.step()

    return step


def torch_trainer_step(layers: int = 50, width: int = 32):
    import torch

    net = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)]).cuda()
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((16, width))
                         .astype(np.float32)).cuda()
    net(x).sum().backward()
    return torch.optim.Adam(net.parameters(), lr=LR).step


def torch_sync():
    import torch

    torch.cuda.synchronize()


# ----------------------------------------------------------------------------- report
def measure(name: str, args) -> None:
    import torch

    batch = {"mlp": 128, "cnn": 64, "resnet18": args.resnet_batch}.get(name, 16)
    if name == "trainer":
        steps = {"engine": engine_trainer_step(), "torch": torch_trainer_step()}
    else:
        steps = {"engine": engine_net_step(name, batch), "torch": torch_net_step(name, batch)}
    syncs = {"engine": cupy_sync, "torch": torch_sync}
    times: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(args.rounds):
        for k, step in steps.items():
            times[k].append(timed(step, syncs[k], args.iters, args.repeats))
    med = {k: statistics.median(v) for k, v in times.items()}
    title = {"mlp": "MLP 784-256-256-10 batch 128, Adam step",
             "cnn": "issue-11 CNN batch 64 3x32x32, Adam step",
             "resnet18": f"ResNet-18 (CIFAR) batch {batch} 3x32x32, Adam step",
             "trainer": "Trainer.step alone, Adam over 100 tensors (50 x Dense(32))"}[name]
    print(f"{title}:")
    for k, v in med.items():
        rounds = ", ".join(f"{t * 1e3:.3f}" for t in times[k])
        label = "rudder engine (cupy)" if k == "engine" else f"pytorch {torch.__version__}"
        print(f"  {label:<28} {v * 1e3:9.3f} ms/step median   (rounds: {rounds})")
    target = TARGETS.get(name)
    note = f"(target <= {target})" if target else "(target: engine <= 0.3 ms)"
    print(f"  engine / torch = {med['engine'] / med['torch']:6.2f}   {note}")
    if name != "trainer":
        print("  images/s: " + ", ".join(f"{k} {batch / v:,.0f}" for k, v in med.items()))
    if name in ("cnn", "resnet18"):
        steps.clear()  # drop the timed nets so the pools below hold one net each
        gc.collect()
        peak_memory(name, batch)


def peak_memory(name: str, batch: int) -> None:
    import torch

    cupy_pool_reset()
    step = engine_net_step(name, batch, seed=1)
    for _ in range(3):
        step()
    cupy_sync()
    engine_bytes = cupy_pool_bytes()
    live = cupy_pool_bytes(in_use=True)  # arrays alive between steps
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    step = torch_net_step(name, batch, seed=1)
    for _ in range(3):
        step()
    torch_sync()
    torch_bytes = torch.cuda.max_memory_reserved()
    print(f"  peak GPU memory: engine {engine_bytes / 2**20:.1f} MiB (cupy pool), "
          f"torch {torch_bytes / 2**20:.1f} MiB (max reserved), "
          f"ratio {engine_bytes / max(torch_bytes, 1):.2f} (target <= 1.5); engine arrays "
          f"alive between steps {live / 2**20:.1f} MiB, the rest the pool's free blocks")


def profile(name: str, args) -> None:
    """cProfile of the engine's step: how much is Python on the host, how much waiting."""
    import cProfile
    import pstats

    batch = {"mlp": 128, "cnn": 64, "resnet18": args.resnet_batch}[name]
    step = engine_net_step(name, batch)
    timed(step, cupy_sync, 5, 1)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.iters):
        step()
    cupy_sync()
    prof.disable()
    print(f"engine {name} step, cProfile over {args.iters} steps (tottime, top 20):")
    pstats.Stats(prof).sort_stats("tottime").print_stats(20)


def profile_ops(name: str, args) -> None:
    """Per-op time of the engine's hybridized step on the GPU: the device is drained before
    and after each kernel's forward and backward, so each row is that op's GPU time plus
    its launches; "other" is the rest (loss, autograd, the optimizer). The step's time
    without those drains comes first: their sum over it says how much the host's Python
    would hide behind the device if it ran ahead."""
    from collections import defaultdict

    from engine_cnn import _kernel_label, wrapped_kernels

    batch = {"mlp": 128, "cnn": 64, "resnet18": args.resnet_batch}[name]
    step = engine_net_step(name, batch)
    free_running = timed(step, cupy_sync, args.iters, args.repeats)
    spent: dict[str, float] = defaultdict(float)
    labels: dict[int, str] = {}
    inner: list[float] = []  # time of the kernels a running kernel calls (BatchNorm's ReLU)

    def drained(method, direction: str):
        def run_drained(kernel, run):
            if direction == "fwd":
                labels[id(kernel)] = _kernel_label(kernel, run)
            cupy_sync()
            t0 = time.perf_counter()
            inner.append(0.0)
            method(kernel, run)
            cupy_sync()
            elapsed = time.perf_counter() - t0
            nested = inner.pop()
            if inner:
                inner[-1] += elapsed
            # each op its own time: a kernel called from another is its own row
            spent[f"{labels.get(id(kernel), '?')} {direction}"] += elapsed - nested
        return run_drained

    with wrapped_kernels(drained):
        for _ in range(2):
            step()
        cupy_sync()
        spent.clear()
        t0 = time.perf_counter()
        for _ in range(args.iters):
            step()
        cupy_sync()
        wall = (time.perf_counter() - t0) / args.iters
    print(f"{name} batch {batch}: {free_running * 1e3:.2f} ms/step free-running, "
          f"{wall * 1e3:.2f} ms with the device drained around every op; by op (ms/step):")
    rows = sorted(spent.items(), key=lambda item: -item[1])
    for label, seconds in rows[:args.top]:
        print(f"  {label:<56} {seconds / args.iters * 1e3:8.3f}")
    rest = sum(v for _, v in rows[args.top:]) / args.iters
    print(f"  {f'({len(rows) - args.top} more ops)':<56} {rest * 1e3:8.3f}")
    other = wall - sum(spent.values()) / args.iters
    print(f"  {'other (loss, autograd, optimizer)':<56} {other * 1e3:8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="mlp,cnn,resnet18,trainer")
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--resnet-batch", type=int, default=128)
    parser.add_argument("--profile", choices=("mlp", "cnn", "resnet18"),
                        help="instead of timing, cProfile the engine's step of this net")
    parser.add_argument("--profile-ops", choices=("mlp", "cnn", "resnet18"),
                        help="instead of timing, the engine's per-op GPU time on this net")
    parser.add_argument("--top", type=int, default=25, help="rows of --profile-ops")
    args = parser.parse_args()
    import torch

    from engine import backend

    if backend.gpu_count() == 0 or not torch.cuda.is_available():
        sys.exit("gpu_step: needs cupy, torch with CUDA and an NVIDIA GPU (scripts/gpu-setup)")
    print(f"device: {torch.cuda.get_device_name(0)}; median of {args.rounds} rounds, "
          f"best of {args.repeats} x {args.iters} steps each")
    if args.profile:
        profile(args.profile, args)
        return
    if args.profile_ops:
        profile_ops(args.profile_ops, args)
        return
    failed = False
    # the anchor is float32 as the engine computes it: no TF32 in cuDNN or cuBLAS
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    for name in args.only.split(","):
        try:
            measure(name, args)
        except Exception as exc:  # noqa: BLE001 - one broken contender must not hide the rest
            print(f"{name}: FAILED {type(exc).__name__}: {exc}")
            failed = True
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
