"""Thread scaling: every contender at 1 thread and at N threads, in the same run.

Issue 29's figures. For each network each round times, in turn, the engine at 1 thread and
at N (in this process: engine.ndarray.kernel_threads.set_count), MXNet 1.9.1 hybridized at
1 and N, and PyTorch at 1 and N (each anchor in its own venv process, its BLAS/OpenMP
threads capped as bench/threads.py caps them), so a load spike on the shared machine hits
them alike. Networks: issue 11's CNN (batch 64) and the CIFAR-form ResNet-18 (batch 16)
of bench/engine_cnn.py, both with Adam; model-zoo ``resnet18_v1`` (batch 32, 3x32x32, SGD
momentum) of bench/engine_zoo.py against MXNet. Prints each contender's median ms/step at 1
and N threads, its scaling (1-thread time / N-thread time), and at N threads the engine's
ratio to each anchor, beside the issue's targets:

- scaling 1 -> 2 threads >= 1.7x on the CNN and on ResNet-18 (MXNet: 1.6x);
- at 2 threads: CNN <= 0.8x MXNet and <= 0.8x PyTorch; ResNet-18 <= 0.8x the faster anchor;
  resnet18_v1 <= 0.6x MXNet.

``--threads 4`` or ``8`` on a 2-core machine oversubscribes it: those figures say how each
contender copes with more threads than cores, not how it scales. Wall-clock scaling means
something only on an otherwise idle machine (``uptime`` load well under 1).

Usage: python bench/scaling.py --threads 2 [--nets cnn,resnet18,resnet18_v1] [--steps 5]
       [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from threads import cap_threads  # noqa: E402

THREADS = cap_threads(default=2)

import engine_cnn  # noqa: E402
import engine_zoo  # noqa: E402
from anchors import anchor_python  # noqa: E402

from engine.ndarray import kernel_threads  # noqa: E402

TARGETS = {"cnn": ("<= 0.8x mxnet, <= 0.8x torch", 1.7),
           "resnet18": ("<= 0.8x the faster anchor", 1.7),
           "resnet18_v1": ("<= 0.6x mxnet", None)}


def _engine(net: str, data):
    if net == "resnet18_v1":
        step = engine_zoo.engine_step(net, data)
        return lambda steps: [wall for wall, _ in engine_zoo.time_engine(step, steps)]
    step = engine_cnn.engine_step(net, data)
    return lambda steps: engine_cnn.time_engine(step, steps)


def _anchor(name: str, net: str, data, steps: int, threads: int) -> list[float] | None:
    if anchor_python(name) is None:
        return None
    if net == "resnet18_v1":
        if name != "mxnet":
            return None
        return [wall for wall, _ in engine_zoo.mxnet_times(net, data, steps, threads)[0]]
    return engine_cnn.run_anchor(name, net, data, steps, threads)


def measure(net: str, steps: int, rounds: int) -> dict[tuple[str, int], list[float]]:
    batch = {"cnn": 64, "resnet18": 16, "resnet18_v1": 32}[net]
    data = (engine_zoo.make_data(batch, 32) if net == "resnet18_v1"
            else engine_cnn.make_data(batch))
    engine_steps = _engine(net, data)
    times: dict[tuple[str, int], list[float]] = {}
    for _ in range(rounds):
        for threads in (1, THREADS):
            kernel_threads.set_count(threads)
            times.setdefault(("engine", threads), []).extend(engine_steps(steps))
        for name in ("mxnet", "torch"):
            for threads in (1, THREADS):
                secs = _anchor(name, net, data, steps, threads)
                if secs is not None:
                    times.setdefault((name, threads), []).extend(secs)
    return times


def report(net: str, times: dict[tuple[str, int], list[float]]) -> None:
    target, scaling_target = TARGETS[net]
    medians = {key: statistics.median(ts) * 1e3 for key, ts in times.items()}
    print(f"{net} (at {THREADS} threads: {target}; scaling target "
          f"{'none' if scaling_target is None else f'>= {scaling_target}x'}):")
    for name in ("engine", "mxnet", "torch"):
        if (name, 1) not in medians:
            continue
        one, many = medians[(name, 1)], medians[(name, THREADS)]
        print(f"  {name:<7} 1 thread {one:8.1f} ms  {THREADS} threads {many:8.1f} ms  "
              f"scaling {one / many:5.2f}x")
    anchors = [n for n in ("mxnet", "torch") if (n, THREADS) in medians]
    for name in anchors:
        print(f"  at {THREADS} threads engine / {name:<6} = "
              f"{medians[('engine', THREADS)] / medians[(name, THREADS)]:5.2f}")
    if anchors:
        fastest = min(medians[(n, THREADS)] for n in anchors)
        print(f"  at {THREADS} threads engine / faster anchor = "
              f"{medians[('engine', THREADS)] / fastest:5.2f}")
        print(f"  at 1 thread engine / faster anchor = "
              f"{medians[('engine', 1)] / min(medians[(n, 1)] for n in anchors):5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default="cnn,resnet18,resnet18_v1")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="the N of 1 vs N threads")
    args = parser.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"1 vs {THREADS} threads each, {os.cpu_count()} cores (load average {load:.2f} at "
          f"start), {args.rounds} interleaved rounds of {args.steps} steps")
    for net in args.nets.split(","):
        report(net, measure(net, args.steps, args.rounds))


if __name__ == "__main__":
    main()
