"""Thread scaling: every contender at 1 thread and at N threads, in the same run, in lockstep.

Issue 29's figures. Six contenders per network: the engine at 1 thread and at N (in this
process: engine.ndarray.kernel_threads.set_count), MXNet 1.9.1 hybridized at 1 and N, and
PyTorch at 1 and N (each anchor configuration a persistent process in its own venv, its
BLAS/OpenMP threads capped as bench/threads.py caps them, its model built and warmed once:
bench/anchors.AnchorStepper). Each round steps every contender in turn, ``--steps`` steps
each, the order rotating from round to round. The shared machines these run on change speed
by tens of percent within a minute (their neighbours' load), so a figure compares samples
taken seconds apart: a contender's time per round is the median of its steps; its scaling
is the median over rounds of (1-thread time / N-thread time) of the same round; the engine's
ratio to an anchor is the median over rounds of the same round's ratio. The spread of the
per-round scaling (lowest and highest) is printed beside it, with a bootstrap 95% interval of the
median: the range more rounds could move it within. Networks: issue 11's CNN
(batch 64) and the CIFAR-form ResNet-18 (batch 16) of bench/engine_cnn.py, both with Adam;
model-zoo ``resnet18_v1`` (batch 32, 3x32x32, SGD momentum) of bench/engine_zoo.py against
MXNet. Targets (issue 29):

- scaling 1 -> 2 threads >= 1.7x on the CNN and on ResNet-18 (MXNet: 1.6x);
- at 2 threads: CNN <= 0.8x MXNet and <= 0.8x PyTorch; ResNet-18 <= 0.8x the faster anchor;
  resnet18_v1 <= 0.6x MXNet.

``--threads 4`` or ``8`` on a 2-core machine oversubscribes it: those figures say how each
contender copes with more threads than cores, not how it scales.

Each net's figures are printed again from every contender's fastest tenth of steps, with the
share of the VM's CPU time the hypervisor stole meanwhile (/proc/stat): neighbours that
steal in bursts scatter even paired rounds, and only ever add time.

The machine's own ceiling is printed before and after (bench/machine_ceiling.py: N
processes of single-threaded sgemm, and of memory copies, at once against one alone). On a
cloud VM one busy core may run at a higher clock than N busy cores, so a GEMM-bound step can
scale by less than N even with no synchronisation at all; read a scaling figure beside it.

Usage: python bench/scaling.py --threads 2 [--nets cnn,resnet18,resnet18_v1] [--steps 2]
       [--rounds 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from contextlib import ExitStack

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from threads import cap_threads  # noqa: E402

THREADS = cap_threads(default=2)

import engine_cnn  # noqa: E402
import engine_zoo  # noqa: E402
import machine_ceiling  # noqa: E402
from anchors import AnchorStepper, anchor_python  # noqa: E402

from engine.ndarray import kernel_threads  # noqa: E402

VERSIONS: dict[str, str] = {}
TARGETS = {"cnn": ("<= 0.8x mxnet, <= 0.8x torch", 1.7),
           "resnet18": ("<= 0.8x the faster anchor", 1.7),
           "resnet18_v1": ("<= 0.6x mxnet", None)}


Key = tuple[str, int]  # (contender, threads)


def _engine_stepper(net: str, data) -> Callable[[int, int], list[float]]:
    """``run(threads, steps)``: the engine's step times at ``threads`` threads."""
    if net == "resnet18_v1":
        step = engine_zoo.engine_step(net, data)
    else:
        step = engine_cnn.engine_step(net, data)
    step()  # traces the hybridized program and completes the deferred shapes
    for threads in (1, THREADS):
        kernel_threads.set_count(threads)
        step()

    def run(threads: int, steps: int) -> list[float]:
        kernel_threads.set_count(threads)  # time_engine's untimed steps settle the threads
        return engine_cnn.time_engine(step, steps)

    return run


def _anchor_code(name: str, net: str, threads: int) -> str | None:
    if anchor_python(name) is None:
        return None
    if net == "resnet18_v1":
        return engine_zoo.mxnet_stepper_code(net) if name == "mxnet" else None
    return engine_cnn.anchor_stepper_code(name, net, threads)


def measure(net: str, steps: int, rounds: int) -> tuple[list[dict[Key, float]],
                                                      dict[Key, list[float]]]:
    """Per round, each contender's median seconds per step; and every step's seconds."""
    batch = {"cnn": 64, "resnet18": 16, "resnet18_v1": 32}[net]
    data = (engine_zoo.make_data(batch, 32) if net == "resnet18_v1"
            else engine_cnn.make_data(batch))
    engine = _engine_stepper(net, data)
    runners: dict[Key, Callable[[int], list[float]]] = {
        ("engine", t): (lambda count, t=t: engine(t, count)) for t in (1, THREADS)}
    with ExitStack() as stack:
        for name in ("mxnet", "torch"):
            for threads in (1, THREADS):
                code = _anchor_code(name, net, threads)
                if code is not None:
                    stepper = stack.enter_context(
                        AnchorStepper(name, code, data, threads=threads))
                    VERSIONS[name] = str(stepper.json.get("version", ""))
                    runners[(name, threads)] = stepper.steps
        keys = list(runners)
        per_round = []
        every: dict[Key, list[float]] = {key: [] for key in keys}
        for r in range(rounds):
            times = {}
            for key in keys[r % len(keys):] + keys[:r % len(keys)]:
                taken = runners[key](steps)
                every[key] += taken
                times[key] = statistics.median(taken)
            per_round.append(times)
    return per_round, every


def _spread(values: list[float]) -> str:
    """The median of per-round ratios, with a bootstrap 95% interval of that median (how
    far more rounds could move it) and the lowest and highest round."""
    low, high = machine_ceiling.median_interval(values)
    return (f"{statistics.median(values):5.2f}x (95% interval {low:.2f}-{high:.2f}; rounds "
            f"{min(values):.2f}-{max(values):.2f})")


def report_fastest(every: dict[Key, list[float]]) -> None:
    """The figures again from each contender's fastest tenth of steps: neighbours on a
    shared VM only ever take time away, so where they steal in bursts (printed below)
    these show each contender's own speed better than the paired medians."""
    fast = {key: machine_ceiling.fastest_tenth(times) for key, times in every.items()}
    names = [n for n in ("engine", "mxnet", "torch") if (n, 1) in fast]
    parts = [f"{n} {fast[(n, 1)] / fast[(n, THREADS)]:.2f}x" for n in names]
    anchors = [n for n in ("mxnet", "torch") if (n, THREADS) in fast]
    line = "  fastest tenth of steps: scaling " + ", ".join(parts)
    for threads in (THREADS, 1):
        if anchors:
            best = min(fast[(n, threads)] for n in anchors)
            line += f"; at {threads} engine / faster anchor {fast[('engine', threads)] / best:.2f}x"
    print(line)


def report(net: str, per_round: list[dict[Key, float]]) -> None:
    target, scaling_target = TARGETS[net]
    keys = per_round[0].keys()
    medians = {key: statistics.median(r[key] for r in per_round) * 1e3 for key in keys}
    print(f"{net} (at {THREADS} threads: {target}; scaling target "
          f"{'none' if scaling_target is None else f'>= {scaling_target}x'}; "
          f"{len(per_round)} rounds):")
    for name in ("engine", "mxnet", "torch"):
        if (name, 1) not in medians:
            continue
        scaling = [r[(name, 1)] / r[(name, THREADS)] for r in per_round]
        label = f"{name} {VERSIONS.get(name, '')}".strip()
        print(f"  {label:<18} 1 thread {medians[(name, 1)]:8.1f} ms  {THREADS} threads "
              f"{medians[(name, THREADS)]:8.1f} ms  scaling {_spread(scaling)}")
    anchors = [n for n in ("mxnet", "torch") if (n, THREADS) in medians]
    for name in anchors:
        ratios = [r[("engine", THREADS)] / r[(name, THREADS)] for r in per_round]
        print(f"  at {THREADS} threads engine / {name:<6} = {_spread(ratios)}")
    if anchors:
        for threads in (THREADS, 1):
            ratios = [r[("engine", threads)] / min(r[(n, threads)] for n in anchors)
                      for r in per_round]
            print(f"  at {threads} thread{'s' if threads > 1 else ''} engine / faster anchor "
                  f"= {_spread(ratios)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default="cnn,resnet18,resnet18_v1")
    parser.add_argument("--steps", type=int, default=2,
                        help="timed steps per contender per round")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2, help="the N of 1 vs N threads")
    args = parser.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"1 vs {THREADS} threads each, {os.cpu_count()} cores (load average {load:.2f} at "
          f"start), {args.rounds} rounds of {args.steps} steps per contender, in lockstep")
    # What the machine itself gives THREADS cores against one, before and after: a figure
    # of scaling means little without it on a shared host (bench/machine_ceiling.py).
    print(machine_ceiling.describe(THREADS, 3), flush=True)
    for net in args.nets.split(","):
        before = machine_ceiling.stolen_ticks()
        per_round, every = measure(net, args.steps, args.rounds)
        report(net, per_round)
        report_fastest(every)
        print(machine_ceiling.stolen_share(before, machine_ceiling.stolen_ticks()))
    print(machine_ceiling.describe(THREADS, 3))


if __name__ == "__main__":
    main()
