"""What this machine gives N cores at once: the scaling ceiling beside bench/scaling.py's figures.

Two kinds of work, each run by one process alone and then by N processes at once (pinned one
per CPU where the affinity mask has N CPUs; separate processes share nothing, so whatever
falls short of N x is the machine's: shared physical cores, a lower all-core clock for wide
vector units, neighbours on the host, memory bandwidth):

- ``sgemm``: 512x512x512 float32 products on numpy's OpenBLAS at one thread, the kernels the
  engine's convolutions and dense layers spend most of their time in;
- ``stream``: copies of 64 MiB, the memory traffic of BatchNorm and the transforms.

Rounds alternate "alone" and "together", so a load phase of a shared machine weighs on both.
The ceiling is the throughput of N together over one alone (median over rounds).

Usage: python bench/machine_ceiling.py [--threads 2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time

_WORK = r"""
import os, sys, time
import numpy as np
kind, start = sys.argv[1], float(sys.argv[2])
if kind == "sgemm":
    a = np.random.default_rng(0).random((512, 512), dtype=np.float32)
    b, out = a.copy(), np.empty_like(a)
    run, units = (lambda: np.matmul(a, b, out=out)), 2 * 512 ** 3 / 1e9
else:
    src = np.ones(16 << 20, np.float32)
    dst = np.empty_like(src)
    run, units = (lambda: np.copyto(dst, src)), 2 * src.nbytes / 1e9
run()
time.sleep(max(0.0, start - time.time()))
done, began = 0, time.perf_counter()
while time.perf_counter() - began < 1.0:
    run()
    done += 1
print(done * units / (time.perf_counter() - began))
"""

KINDS = {"sgemm": "GFLOP/s", "stream": "GB/s"}


def _together(kind: str, processes: int) -> float:
    """Summed throughput of ``processes`` processes running ``kind`` at once."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    start = time.time() + 1.0  # every process has loaded numpy by then
    children = []
    for i in range(processes):
        pin = ["taskset", "-c", str(cpus[i])] if len(cpus) >= processes and _has_taskset() \
            else []
        children.append(subprocess.Popen([*pin, sys.executable, "-c", _WORK, kind, str(start)],
                                         env=env, stdout=subprocess.PIPE, text=True))
    return sum(float(child.communicate()[0]) for child in children)


def _has_taskset() -> bool:
    return any(os.access(os.path.join(d, "taskset"), os.X_OK)
               for d in os.environ.get("PATH", "").split(os.pathsep))


def ceilings(processes: int, rounds: int) -> dict[str, tuple[float, float, float]]:
    """Per kind: (one alone, N together, ceiling = median over rounds of together / alone)."""
    found = {}
    for kind in KINDS:
        alone, together, ratios = [], [], []
        for _ in range(rounds):
            alone.append(_together(kind, 1))
            together.append(_together(kind, processes))
            ratios.append(together[-1] / alone[-1])
        found[kind] = (statistics.median(alone), statistics.median(together),
                       statistics.median(ratios))
    return found


def describe(processes: int, rounds: int) -> str:
    lines = [f"machine ceiling ({processes} processes at once against one alone, "
             f"median of {rounds} alternating rounds):"]
    for kind, (alone, together, ratio) in ceilings(processes, rounds).items():
        unit = KINDS[kind]
        lines.append(f"  {kind:<7} one {alone:7.1f} {unit}, {processes} together "
                     f"{together:7.1f} {unit}: {ratio:4.2f}x")
    return "\n".join(lines)


def stolen_ticks() -> tuple[int, int]:
    """(ticks stolen by the hypervisor, all ticks) of every CPU so far (/proc/stat; zeros
    where there is none): the difference over a run says what share neighbours took."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


def stolen_share(before: tuple[int, int], after: tuple[int, int]) -> str:
    """The line saying what share of the VM's CPU time was stolen between two readings."""
    total = after[1] - before[1]
    share = 100 * (after[0] - before[0]) / total if total > 0 else 0.0
    return f"  stolen by the hypervisor meanwhile: {share:.1f}% of this VM's CPU time"


def fastest_tenth(times: list[float]) -> float:
    """The lower decile of step times: neighbours on a shared VM only ever add time, so
    where they steal in bursts this shows a contender's own speed better than a median."""
    return statistics.quantiles(times, n=10)[0] if len(times) > 1 else times[0]


def median_interval(values: list[float], level: float = 0.95,
                    resamples: int = 4000) -> tuple[float, float]:
    """A percentile-bootstrap confidence interval of the median of ``values``: how far
    the median of this many noisy pairs could be from the one more rounds would give."""
    rng = random.Random(1)
    medians = sorted(statistics.median(rng.choices(values, k=len(values)))
                     for _ in range(resamples))
    tail = (1 - level) / 2
    return medians[int(tail * resamples)], medians[int((1 - tail) * resamples) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="processes at once")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(describe(args.threads, args.rounds))


if __name__ == "__main__":
    main()
