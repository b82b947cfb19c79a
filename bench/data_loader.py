"""Image loading speed: the engine's loaders side by side with MXNet 1.9.1's ImageRecordIter.

Data: a RecordIO file of 32x32 JPEGs (quality 90, written with engine.recordio.pack_img)
made in a temporary folder. Pipeline: random 28x28 crop + random mirror + per-channel
mean/std normalisation to NCHW float32, batch 128, shuffled, 2 workers each:

- ``mxnet``: ``mx.io.ImageRecordIter(preprocess_threads=2)`` in the anchor venv;
- ``engine-iter``: ``engine.io.ImageRecordIter(preprocess_threads=2)`` (worker processes,
  per-batch vectorised augmentation);
- ``engine-gluon``: ``gluon.data.DataLoader(num_workers=2)`` over an ``ImageRecordDataset``
  with per-sample ``transforms`` (RandomResizedCrop at a fixed 28x28 area, which is a
  random crop, RandomFlipLeftRight, ToTensor, Normalize), the Gluon way.

Each round times every contender in turn over ``--passes`` full passes after one warm-up
pass; figures are the median images/s over the rounds (target: engine >= mxnet), and the
CPU time each spent per image (all its threads/processes, warm-up included), which says
more than images/s when the machine is shared.

Then a small CNN (Conv16-ReLU-Pool-Conv32-ReLU-Pool-Dense10, SGD) trains on the
engine-iter batches for ``--steps`` steps and the fraction of the loop spent waiting for the
next batch is reported (target: < 5%).

Usage: python bench/data_loader.py [--images 20000] [--rounds 3] [--passes 1] [--steps 60]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from threads import cap_threads  # noqa: E402

THREADS = cap_threads()

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anchors import anchor_python, run_in_anchor  # noqa: E402

import engine  # noqa: E402
from engine import recordio  # noqa: E402

MEAN = (125.3, 123.0, 113.9)
STD = (63.0, 62.1, 66.7)
BATCH = 128
CROP = 28
WORKERS = 2


def make_records(folder: Path, count: int) -> str:
    rng = np.random.default_rng(0)
    base = np.add.outer(np.arange(32) * 4, np.arange(32) * 3)[:, :, None] * [1, 2, 3]
    path = str(folder / "bench32.rec")
    writer = recordio.MXIndexedRecordIO(path[:-4] + ".idx", path, "w")
    for i in range(count):
        shift = rng.integers(0, 256)
        img = np.clip((base + shift) % 256 + rng.integers(-40, 40, (32, 32, 3)), 0, 255)
        writer.write_idx(i, recordio.pack_img((0, float(i % 10), i, 0), img.astype(np.uint8),
                                              quality=90))
    writer.close()
    return path


def iter_kwargs(path: str) -> dict:
    return dict(path_imgrec=path, path_imgidx=path[:-4] + ".idx", data_shape=(3, CROP, CROP),
                batch_size=BATCH, rand_crop=True, rand_mirror=True, shuffle=True,
                mean_r=MEAN[0], mean_g=MEAN[1], mean_b=MEAN[2], std_r=STD[0], std_g=STD[1],
                std_b=STD[2], preprocess_threads=WORKERS, prefetch_buffer=4)


MXNET_CODE = """
import resource, time
import mxnet as mx
cpu0 = resource.getrusage(resource.RUSAGE_SELF)
it = mx.io.ImageRecordIter(**{kwargs})
total = 0
for b in it:
    total += b.data[0].shape[0] - b.pad
rates = []
for p in range({passes}):
    it.reset()
    start, n = time.perf_counter(), 0
    for b in it:
        n += b.data[0].shape[0] - b.pad
    b.data[0].wait_to_read()
    rates.append(n / (time.perf_counter() - start))
    total += n
del it
cpu1 = resource.getrusage(resource.RUSAGE_SELF)
result['rate'] = sum(rates) / len(rates)
result['cpu_us'] = 1e6 * (cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime) / total
"""


def time_mxnet(path: str, passes: int) -> tuple[float, float]:
    code = MXNET_CODE.replace("{kwargs}", repr(iter_kwargs(path))).replace("{passes}",
                                                                          str(passes))
    run = run_in_anchor("mxnet", code, threads=WORKERS, timeout=600)
    return float(run.json["rate"]), float(run.json["cpu_us"])


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have ended (the workers)."""
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                             resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def time_passes(make, passes: int) -> tuple[float, float]:
    """(images/s over the timed passes, CPU µs per image over the loader's whole life,
    workers included)."""
    cpu = cpu_seconds()
    batches, close = make()
    total = sum(data.shape[0] - pad for data, pad in batches())  # warm-up pass
    rates = []
    for _ in range(passes):
        start, n = time.perf_counter(), 0
        for data, pad in batches():
            n += data.shape[0] - pad
        rates.append(n / (time.perf_counter() - start))
        total += n
    close()
    return sum(rates) / len(rates), 1e6 * (cpu_seconds() - cpu) / total


def time_engine_iter(path: str, passes: int) -> tuple[float, float]:
    def make():
        it = engine.io.ImageRecordIter(**iter_kwargs(path))

        def batches():
            it.reset()
            for b in it:
                yield b.data[0], b.pad

        return batches, it.close

    return time_passes(make, passes)


def gluon_loader(path: str):
    from engine.gluon.data import DataLoader
    from engine.gluon.data.vision import ImageRecordDataset, transforms

    area = CROP * CROP / (32 * 32)
    pipeline = transforms.Compose([
        transforms.RandomResizedCrop(CROP, scale=(area, area), ratio=(1.0, 1.0)),
        transforms.RandomFlipLeftRight(), transforms.ToTensor(),
        transforms.Normalize([m / 255 for m in MEAN], [s / 255 for s in STD])])
    dataset = ImageRecordDataset(path).transform_first(pipeline)
    return DataLoader(dataset, batch_size=BATCH, shuffle=True, num_workers=WORKERS,
                      last_batch="discard")


def time_engine_gluon(path: str, passes: int) -> tuple[float, float]:
    def make():
        loader = gluon_loader(path)

        def batches():
            for data, _ in loader:
                yield data, 0

        return batches, loader.close

    return time_passes(make, passes)


def data_wait_fraction(path: str, steps: int) -> tuple[float, float, float]:
    """(fraction of the loop waiting for data, ms per step, images/s) for a small CNN."""
    from engine import autograd, gluon
    from engine.gluon import nn

    engine.random.seed(0)
    net = nn.HybridSequential()
    net.add(nn.Conv2D(16, 3, padding=1, activation="relu"), nn.MaxPool2D(),
            nn.Conv2D(32, 3, padding=1, activation="relu"), nn.MaxPool2D(), nn.Dense(10))
    net.initialize(engine.init.Xavier())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    it = engine.io.ImageRecordIter(**iter_kwargs(path))
    waited = 0.0
    done = 0
    try:
        batch = it.next()  # the first batch pays for starting the workers: not counted
        start = time.perf_counter()
        while done < steps:
            with autograd.record():
                loss = loss_fn(net(batch.data[0]), batch.label[0])
            loss.backward()
            trainer.step(BATCH)
            loss.asnumpy()
            done += 1
            before = time.perf_counter()
            try:
                batch = it.next()
            except StopIteration:
                it.reset()
                batch = it.next()
            waited += time.perf_counter() - before
        total = time.perf_counter() - start
    finally:
        it.close()
    return waited / total, 1000 * total / steps, steps * BATCH / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--passes", type=int, default=1, help="timed passes per round")
    parser.add_argument("--steps", type=int, default=60, help="CNN steps for the wait figure")
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS/OpenMP threads (see bench/threads.py)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rudder-bench-data-") as folder:
        path = make_records(Path(folder), args.images)
        size = os.path.getsize(path) / 2**20
        print(f"{args.images} 32x32 JPEGs ({size:.1f} MiB), crop {CROP}, batch {BATCH}, "
              f"{WORKERS} workers, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
              f"{args.rounds} interleaved rounds")
        contenders = {"engine-iter": time_engine_iter, "engine-gluon": time_engine_gluon}
        if anchor_python("mxnet") is not None:
            contenders = {"mxnet": time_mxnet, **contenders}
        else:
            print("(MXNet anchor not built: bench/setup; engine figures only)")
        rates: dict[str, list[float]] = {name: [] for name in contenders}
        cpus: dict[str, list[float]] = {name: [] for name in contenders}
        for _ in range(args.rounds):
            for name, timer in contenders.items():
                rate, cpu = timer(path, args.passes)
                rates[name].append(rate)
                cpus[name].append(cpu)
        medians = {name: statistics.median(values) for name, values in rates.items()}
        cpu_medians = {name: statistics.median(values) for name, values in cpus.items()}
        for name, values in rates.items():
            line = (f"{name:13s} {medians[name]:9.0f} images/s  "
                    f"{cpu_medians[name]:5.1f} CPU us/image")
            if "mxnet" in medians and name != "mxnet":
                line += f"  ({medians[name] / medians['mxnet']:.2f}x mxnet's images/s)"
            print(line + "  rounds: " + ", ".join(f"{v:.0f}" for v in values))
        wait, step_ms, rate = data_wait_fraction(path, args.steps)
        print(f"small CNN on engine-iter batches: {100 * wait:.1f}% of the loop waiting for "
              f"data ({step_ms:.0f} ms/step, {rate:.0f} images/s; target < 5%)")


if __name__ == "__main__":
    main()
