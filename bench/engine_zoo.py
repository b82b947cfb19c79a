"""Model-zoo training steps, the engine side by side with MXNet 1.9.1, both hybridized.

The same zoo constructor is called in both (``engine.gluon.model_zoo.vision`` here,
``mxnet.gluon.model_zoo.vision`` in the anchor venv) with ``classes=10``; batch 32 of
3x32x32 float32 by default; SoftmaxCrossEntropy; SGD (lr 0.01, momentum 0.9); Xavier init;
``hybridize()`` (MXNet with static_alloc/static_shape, its fastest setting). CPU.

Each round times every contender in turn (MXNet in its own venv process), so a load spike on
the shared machine hits them alike; a contender's figure is the median ms/step over all its
timed steps, in wall-clock time and in the CPU time of its process (all threads), which a
loaded machine disturbs far less. ``--threads N`` caps every contender's BLAS/OpenMP
threads alike (bench/threads.py, default 1).

Usage: python bench/engine_zoo.py [--models resnet18_v1] [--batch 32] [--size 32]
       [--steps 5] [--rounds 3] [--threads 1] [--profile]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from threads import cap_threads  # noqa: E402

THREADS = cap_threads()

import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import engine_cnn  # noqa: E402
from anchors import anchor_python, run_in_anchor, stepper_code  # noqa: E402

OPTIMIZER = ("sgd", {"learning_rate": 0.01, "momentum": 0.9})


def make_data(batch: int, size: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((batch, 3, size, size)).astype(np.float32),
            "y": rng.integers(0, 10, batch).astype(np.float32)}


def engine_step(model: str, data: dict[str, np.ndarray]):
    from engine import autograd, gluon, init, nd
    from engine.gluon.model_zoo import vision

    net = vision.get_model(model, classes=10)
    net.initialize(init.Xavier())
    net.hybridize(static_alloc=True, static_shape=True)  # as the worker and the MXNet anchor
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), *OPTIMIZER)
    x, y = nd.array(data["x"]), nd.array(data["y"])
    batch = data["x"].shape[0]

    def step() -> None:
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(batch)
        loss.wait_to_read()

    return step


def time_engine(step, steps: int) -> list[tuple[float, float]]:
    """(wall, cpu) seconds of each timed step."""
    step()  # traces the hybridized program and completes the deferred shapes
    step()
    times = []
    for _ in range(steps):
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        times.append((time.perf_counter() - t0, time.process_time() - c0))
    return times


MXNET_SNIPPET = """
import time
from mxnet.gluon.model_zoo import vision
net = vision.get_model(MODEL, classes=10)
net.initialize(mx.init.Xavier())
net.hybridize(static_alloc=True, static_shape=True)
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
trainer = gluon.Trainer(net.collect_params(), *OPTIMIZER)
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
    t0, c0 = time.perf_counter(), time.process_time()
    step()
    times.append((time.perf_counter() - t0, time.process_time() - c0))
result['seconds'] = times
result['version'] = mx.__version__
"""


def mxnet_code(model: str, steps: int) -> str:
    """MXNet's snippet: build the zoo ``model``, warm it up, time ``steps`` steps."""
    return ("import mxnet as mx\nfrom mxnet import autograd, gluon, nd\n"
            + MXNET_SNIPPET.replace("MODEL", repr(model)).replace("OPTIMIZER", repr(OPTIMIZER))
            .replace("STEPS", str(steps)))


def mxnet_stepper_code(model: str) -> str:
    """MXNet's snippet for an ``anchors.AnchorStepper`` (no timing loop; version in result)."""
    return stepper_code(mxnet_code(model, 0), "mx")


def mxnet_times(model: str, data: dict[str, np.ndarray], steps: int,
                threads: int | None = None) -> tuple[list[tuple[float, float]], str]:
    run = run_in_anchor("mxnet", mxnet_code(model, steps), data, timeout=600,
                        threads=THREADS if threads is None else threads)
    return [(float(w), float(c)) for w, c in run.json["seconds"]], str(run.json["version"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet18_v1")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=32, help="square input size")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS/OpenMP threads for every contender (see bench/threads.py)")
    parser.add_argument("--profile", action="store_true",
                        help="the engine's per-op time table instead of the comparison")
    args = parser.parse_args()
    if args.profile:
        for model in args.models.split(","):
            engine_cnn.profile(model, make_data(args.batch, args.size), args.steps,
                               engine_step)
        return
    has_mxnet = anchor_python("mxnet") is not None
    print(f"{THREADS} thread(s) each, {os.cpu_count()} cores, {args.rounds} interleaved rounds "
          f"of {args.steps} steps; batch {args.batch} of 3x{args.size}x{args.size}, "
          f"classes=10, {OPTIMIZER[0]} {OPTIMIZER[1]}, hybridized")
    for model in args.models.split(","):
        data = make_data(args.batch, args.size)
        step = engine_step(model, data)
        times: dict[str, list[tuple[float, float]]] = {"engine": [], "mxnet": []}
        version = ""
        for _ in range(args.rounds):
            times["engine"] += time_engine(step, args.steps)
            if has_mxnet:
                secs, version = mxnet_times(model, data, args.steps)
                times["mxnet"] += secs
        print(f"{model}:")
        medians: dict[str, tuple[float, float]] = {}
        for name, label in (("engine", "rudder engine"),
                            ("mxnet", f"mxnet {version} hybridized")):
            if not times[name]:
                print(f"  {label}: not built (run bench/setup) - skipped")
                continue
            wall = [w for w, _ in times[name]]
            cpu = [c for _, c in times[name]]
            medians[name] = (statistics.median(wall), statistics.median(cpu))
            print(f"  {label:<28} {medians[name][0] * 1e3:8.1f} ms/step wall median "
                  f"(min {min(wall) * 1e3:.1f}, max {max(wall) * 1e3:.1f}, {len(wall)} steps); "
                  f"{medians[name][1] * 1e3:.1f} ms CPU")
        if len(medians) == 2:
            print(f"  engine / mxnet = {medians['engine'][0] / medians['mxnet'][0]:5.2f} wall, "
                  f"{medians['engine'][1] / medians['mxnet'][1]:5.2f} CPU")


if __name__ == "__main__":
    main()
