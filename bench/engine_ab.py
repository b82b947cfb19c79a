"""The engine against itself: two or more configurations of one training step, in lockstep.

A configuration is a set of environment settings (``RUDDER_ENGINE_DEFER=off``,
``RUDDER_ENGINE_WINOGRAD=2x2``, ``RUDDER_ENGINE_THREADS=1``, ...) that the engine reads when
it loads, and may name another checkout of the repository to take the engine from
(``ENGINE_AB_TREE=/path``, e.g. a ``git worktree`` of an older commit: a change against the
code before it), so each runs in a process of its own: a persistent child that builds and warms the
network once, then answers "step N" with N step times (one JSON line each way; nothing is
pickled). Each round steps every configuration in turn, ``--steps`` steps each, the order
rotating from round to round, and a configuration's figure is the median over rounds of its
time divided by the first configuration's time *in the same round*: the shared VMs these run
on change speed by tens of percent within a minute, and samples taken seconds apart cancel
most of that (see bench/scaling.py). The spread over rounds is printed beside each ratio,
and below them each configuration's fastest tenth of steps (a VM whose neighbours steal
a fifth of its time in bursts leaves even paired medians scattered).

Networks: issue 11's CNN (batch 64) and the CIFAR-form ResNet-18 (batch 16) of
bench/engine_cnn.py, with Adam; model-zoo ``resnet18_v1`` (batch 32, 3x32x32, SGD momentum)
of bench/engine_zoo.py.

Usage: python bench/engine_ab.py --net resnet18_v1 --threads 2
       [--config name:VAR=value,VAR=value ...] [--rounds 16] [--steps 2]
With no ``--config``: deferred weight gradients on and off (issue 29).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import machine_ceiling  # noqa: E402

DEFAULT_CONFIGS = ("deferred:", "not-deferred:RUDDER_ENGINE_DEFER=off")

# the child: imports the engine under its own environment, builds one network, steps on
# request (the net's name comes in argv, never code)
_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from threads import cap_threads
cap_threads(default=int(sys.argv[3]))
import engine_cnn, engine_zoo
net = sys.argv[2]
if net == "resnet18_v1":
    step = engine_zoo.engine_step(net, engine_zoo.make_data(32, 32))
else:
    step = engine_cnn.engine_step(net, engine_cnn.make_data(64 if net == "cnn" else 16))
for _ in range(3):  # traces the program, compiles, settles the allocator
    step()
print("ready", flush=True)
for line in sys.stdin:
    times = []
    step()  # untimed: this process's caches were cold after the others ran
    for _ in range(int(line)):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    print(json.dumps(times), flush=True)
"""


def parse_config(text: str) -> tuple[str, dict[str, str]]:
    """``name:VAR=value,VAR=value`` → (name, settings)."""
    name, _, rest = text.partition(":")
    if not name:
        raise SystemExit(f"--config {text!r}: expected name:VAR=value,...")
    settings = {}
    for item in filter(None, rest.split(",")):
        var, eq, value = item.partition("=")
        if not eq or not var:
            raise SystemExit(f"--config {text!r}: {item!r} is not VAR=value")
        settings[var] = value
    return name, settings


class Child:
    """One configuration's persistent stepping process."""

    def __init__(self, net: str, threads: int, settings: dict[str, str]) -> None:
        env = dict(os.environ)
        env.update(settings)
        bench = Path(settings["ENGINE_AB_TREE"]) / "bench" if "ENGINE_AB_TREE" in settings \
            else BENCH
        self.process = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(bench), net, str(threads)], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for line in self.process.stdout:  # type: ignore[union-attr]
            if line.strip() == "ready":
                return
        raise RuntimeError(f"the configuration {settings} exited before it was ready")

    def steps(self, count: int) -> list[float]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{count}\n")
        self.process.stdin.flush()
        return [float(t) for t in json.loads(self.process.stdout.readline())]

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--net", default="resnet18_v1",
                        choices=("cnn", "resnet18", "resnet18_v1"))
    parser.add_argument("--threads", type=int, default=2,
                        help="engine threads of every configuration that does not set them")
    parser.add_argument("--config", action="append", default=[],
                        help="name:VAR=value,... (repeat; the first is the reference)")
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--steps", type=int, default=2, help="timed steps per turn")
    args = parser.parse_args()
    configs = [parse_config(c) for c in (args.config or DEFAULT_CONFIGS)]
    print(f"{args.net}, {args.threads} engine threads unless set, {args.rounds} rounds of "
          f"{args.steps} steps each, in lockstep; {os.cpu_count()} cores", flush=True)
    children: dict[str, Child] = {}
    try:
        for name, settings in configs:
            threads = int(settings.get("RUDDER_ENGINE_THREADS", args.threads))
            children[name] = Child(args.net, threads, settings)
        names = list(children)
        stolen = machine_ceiling.stolen_ticks()
        per_round: list[dict[str, float]] = []
        every: dict[str, list[float]] = {name: [] for name in names}
        for r in range(args.rounds):
            times = {}
            for name in names[r % len(names):] + names[:r % len(names)]:
                steps = children[name].steps(args.steps)
                every[name] += steps
                times[name] = statistics.median(steps)
            per_round.append(times)
    finally:
        for child in children.values():
            child.close()
    reference = names[0]
    for (name, settings) in configs:
        ratios = [t[name] / t[reference] for t in per_round]
        interval = machine_ceiling.median_interval(ratios)
        described = ",".join(f"{k}={v}" for k, v in settings.items()) or "as set"
        print(f"  {name:16s} {statistics.median(t[name] for t in per_round) * 1e3:8.1f} ms/step"
              f"  / {reference}: {statistics.median(ratios):.3f} "
              f"(95% interval {interval[0]:.3f}-{interval[1]:.3f}; rounds "
              f"{min(ratios):.2f}-{max(ratios):.2f})  [{described}]", flush=True)
    # A neighbour on a shared VM only ever takes time away: each configuration's fastest
    # tenth of steps shows its own speed where bursts of stolen time swamp the medians.
    fast = {name: machine_ceiling.fastest_tenth(every[name]) for name in names}
    print("  fastest tenth of steps: " + ", ".join(
        f"{name} {fast[name] * 1e3:.1f} ms ({fast[name] / fast[reference]:.3f})"
        for name in names), flush=True)
    print(machine_ceiling.stolen_share(stolen, machine_ceiling.stolen_ticks()), flush=True)


if __name__ == "__main__":
    main()
