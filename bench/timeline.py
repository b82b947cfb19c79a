"""Where a multi-threaded engine step leaves cores idle: a timeline of every engine thread.

Runs one of bench/engine_cnn.py's or bench/engine_zoo.py's hybridized training steps with
``--threads N`` and records, on every thread, when it ran what:

- the hybridized program's op kernels (forward and backward, on the calling thread);
- compiled kernels (engine.ndarray.kernel_threads.Kernel), serial or on all N threads (a
  parallel build keeps every core busy for its duration);
- the pool's tasks: a job's pieces (run_tasks: GEMM blocks, Winograd products) and the
  deferred work (weight gradients, weight preparations), on whichever thread took them.

From these it prints, per step (median over the traced steps): wall time; each thread's busy
time; the *idle core time* (N x wall minus the time threads spent computing); and, for the
time when fewer than N threads computed, what the main thread was doing then: the op it was
in, and whether inside a compiled kernel's serial build, inside a task, waiting, or in
Python between kernels. That is the list of what keeps a step from scaling.

Tracing costs time of its own (a few percent of a step): read the shares, not the wall.

Usage: python bench/timeline.py --threads 2 [--net cnn|resnet18|resnet18_v1] [--steps 20]
       [--top 25] [--dump]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from threads import cap_threads  # noqa: E402

THREADS = cap_threads(2)

from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import engine_cnn  # noqa: E402


class Recorder:
    """Spans (thread id, kind, label, start, end) appended from any thread."""

    def __init__(self) -> None:
        self.spans: list[tuple[int, str, str, float, float]] = []
        self.on = False

    def span(self, kind: str, label: str, fn, *args):
        if not self.on:
            return fn(*args)
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.spans.append((threading.get_ident(), kind, label, t0, time.perf_counter()))


def instrument(recorder: Recorder):
    """Patch the engine's kernel, task and op entry points to record spans; returns undo."""
    from engine.ndarray import kernel_threads as kt

    undo = []

    kernel_call = kt.Kernel.__call__

    def traced_kernel(self, *args):
        if not recorder.on:
            return kernel_call(self, *args)
        threads = kt.parallel_threads(args)  # the engine's own choice, asked beforehand
        kind = f"kernel-par{threads}" if threads > 1 else "kernel"
        return recorder.span(kind, self.__name__, kernel_call, self, *args)

    kt.Kernel.__call__ = traced_kernel
    undo.append(lambda: setattr(kt.Kernel, "__call__", kernel_call))

    job_init = kt._Job.__init__

    def traced_job_init(self, tasks):
        wrapped = [(lambda t=t: recorder.span("task", getattr(t, "__qualname__", "task"), t))
                   for t in tasks]
        job_init(self, wrapped)

    kt._Job.__init__ = traced_job_init
    undo.append(lambda: setattr(kt._Job, "__init__", job_init))

    run_deferred = kt._Pool._run_deferred

    def traced_deferred(self, task):
        return recorder.span("deferred", "deferred", run_deferred, self, task)

    kt._Pool._run_deferred = traced_deferred
    undo.append(lambda: setattr(kt._Pool, "_run_deferred", run_deferred))

    from engine.ndarray import gemm

    numpy_module = gemm.np

    class TracedNumpy:
        """gemm's numpy, its matmul recorded (a product run inline, not as a task)."""

        def __getattr__(self, name):
            return getattr(numpy_module, name)

        @staticmethod
        def matmul(*a, **k):
            return recorder.span("gemm", "matmul", lambda: numpy_module.matmul(*a, **k))

    gemm.np = TracedNumpy()
    undo.append(lambda: setattr(gemm, "np", numpy_module))

    # where the calling thread waits: for a job's last tasks, for deferred work, for a result
    for owner, name, kind in ((kt._Pool, "run", "wait-job"), (kt._Pool, "drain", "wait-drain"),
                              (kt.Ticket, "result", "wait-ticket")):
        original = getattr(owner, name)

        def traced_wait(self, *a, _original=original, _kind=kind):
            return recorder.span(_kind, _kind, _original, self, *a)

        setattr(owner, name, traced_wait)
        undo.append(lambda owner=owner, name=name, original=original:
                    setattr(owner, name, original))

    labels: dict[int, str] = {}

    def wrap(method, direction):
        def traced(kernel, run):
            if direction == "fwd" or id(kernel) not in labels:
                labels[id(kernel)] = engine_cnn._kernel_label(kernel, run)
            return recorder.span("op", f"{labels[id(kernel)]} {direction}", method, kernel,
                                 run)
        return traced

    wrapped = engine_cnn.wrapped_kernels(wrap)
    wrapped.__enter__()
    undo.append(lambda: wrapped.__exit__(None, None, None))

    return lambda: [u() for u in reversed(undo)]


COMPUTING = ("kernel", "task", "deferred", "gemm")


def analyse(spans, main: int, threads: int, t_start: float, t_end: float):
    """Idle core time in [t_start, t_end] (``threads`` x wall minus the time threads
    computed), and for each stretch when fewer than ``threads`` computed, what the main
    thread was doing then (its op, and its innermost span), weighted by the idle cores."""
    events = sorted([(s[3], 1, s) for s in spans] + [(s[4], 0, s) for s in spans],
                    key=lambda e: (e[0], e[1]))
    points = sorted({t_start, t_end, *[e[0] for e in events if t_start <= e[0] <= t_end]})
    active: dict[int, list] = defaultdict(list)  # thread -> its open spans, innermost last
    blame: dict[str, float] = defaultdict(float)
    busy_core_time = 0.0
    idx = 0
    for a, b in zip(points, points[1:], strict=False):
        while idx < len(events) and events[idx][0] <= a:
            _, opening, s = events[idx]
            if opening:
                active[s[0]].append(s)
            elif s in active[s[0]]:
                active[s[0]].remove(s)
            idx += 1
        main_stack = active.get(main, [])
        main_inner = main_stack[-1] if main_stack else None
        others = [st[-1][1] for tid, st in active.items() if tid != main and st]
        computing = sum(1 for kind in others if kind in COMPUTING)
        if main_inner is not None and main_inner[1].startswith("kernel-par"):
            computing = threads  # a parallel build keeps every core busy
        elif main_inner is None or not main_inner[1].startswith("wait"):
            computing += 1  # computing, or Python and numpy between kernels
        computing = min(computing, threads)
        busy_core_time += computing * (b - a)
        if computing < threads:
            op = next((x[2] for x in reversed(main_stack) if x[1] == "op"), "outside ops")
            if main_inner is None or main_inner[1] == "op":
                what = "python/numpy"
            elif main_inner[1] == "kernel":
                what = f"serial kernel {main_inner[2]}"
            else:
                what = main_inner[1]
            blame[f"{op} | {what}"] += (threads - computing) * (b - a)
    return busy_core_time, blame


def dump(spans, main, t_start):
    """Every span of one step in start order (for reading one op closely)."""
    for tid, kind, label, t0, t1 in sorted(spans, key=lambda s: s[3]):
        who = "main" if tid == main else f"t{tid % 1000}"
        print(f"{(t0 - t_start) * 1e3:8.3f} {(t1 - t0) * 1e3:7.3f} {who:>5} {kind:<12} {label}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--net", default="cnn")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dump", action="store_true",
                        help="also print every span of the fastest traced step")
    args = parser.parse_args()

    if args.net == "resnet18_v1":  # bench/engine_zoo.py's: batch 32 of 3x32x32
        import engine_zoo
        step = engine_zoo.engine_step("resnet18_v1", engine_zoo.make_data(32, 32))
    else:
        step = engine_cnn.engine_step(args.net, engine_cnn.make_data(
            64 if args.net == "cnn" else 16))
    recorder = Recorder()
    undo = instrument(recorder)
    main_id = threading.get_ident()
    for _ in range(3):
        step()
    walls, idles = [], []
    fastest: tuple[float, list, float] | None = None
    blame_total: dict[str, float] = defaultdict(float)
    for _ in range(args.steps):
        recorder.spans = []
        recorder.on = True
        t0 = time.perf_counter()
        step()
        t1 = time.perf_counter()
        recorder.on = False
        busy, blame = analyse(recorder.spans, main_id, THREADS, t0, t1)
        walls.append(t1 - t0)
        idles.append(THREADS * (t1 - t0) - busy)
        if fastest is None or t1 - t0 < fastest[0]:
            fastest = (t1 - t0, recorder.spans, t0)
        for k, v in blame.items():
            blame_total[k] += v
    undo()
    n = args.steps
    wall = statistics.median(walls)
    print(f"{args.net} at {THREADS} threads: {wall * 1e3:.1f} ms/step wall (median of {n}, "
          f"traced), idle core time {statistics.median(idles) * 1e3:.1f} ms/step "
          f"({statistics.median(idles) / (THREADS * wall):.0%} of {THREADS} x wall)")
    print(f"  {'where the main thread was while a core idled (op | what)':<78} {'ms/step':>8}")
    ranked = sorted(blame_total.items(), key=lambda kv: -kv[1])
    for label, v in ranked[:args.top]:
        print(f"  {label[:78]:<78} {v / n * 1e3:8.2f}")
    rest = sum(v for _, v in ranked[args.top:])
    print(f"  {'(the rest)':<78} {rest / n * 1e3:8.2f}")
    if args.dump and fastest is not None:
        print(f"\nthe fastest traced step ({fastest[0] * 1e3:.1f} ms), span by span "
              "(start ms, length ms, thread, kind, label):")
        dump(fastest[1], main_id, fastest[2])


if __name__ == "__main__":
    main()

