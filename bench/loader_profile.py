"""Where the engine's ImageRecordIter spends its CPU, stage by stage (µs per image).

Same data and pipeline as bench/data_loader.py (32x32 JPEGs, random 28x28 crop, random
mirror, mean/std normalisation, batch 128). Each stage of a worker's batch is timed on its
own in this process (CPU time, median of ``--rounds``), then the whole iterator with 2
worker processes, its CPU split between the training process and the workers. Pillow's
decoding of the same JPEGs (Image.open) is shown for comparison. The stages run on warm
caches, batch after batch of one kind; the workers' figure, measured whole, is a few µs
higher (cold caches, task and shared-memory traffic).

Usage: python bench/loader_profile.py [--images 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from threads import cap_threads  # noqa: E402

cap_threads()

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from data_loader import BATCH, CROP, MEAN, STD, iter_kwargs, make_records  # noqa: E402

import engine  # noqa: E402
from engine.gluon.data import RecordFileDataset  # noqa: E402
from engine.image.codec import decode_rgb_batch  # noqa: E402
from engine.image.record_iter import _BatchBuilder  # noqa: E402


def per_image(work, batches: list, rounds: int) -> float:
    """Median CPU µs per image of ``work(batch)`` over all batches."""
    images = sum(len(batch) for batch in batches)
    times = []
    for _ in range(rounds):
        start = time.process_time()
        for batch in batches:
            work(batch)
        times.append(time.process_time() - start)
    return 1e6 * statistics.median(times) / images


def loader_split(path: str, passes: int = 3) -> tuple[float, float, float]:
    """(images/s, CPU µs/image of the training process, of the workers) for 2 workers."""
    def cpu(who: int) -> float:
        usage = resource.getrusage(who)
        return usage.ru_utime + usage.ru_stime

    own, children = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
    it = engine.io.ImageRecordIter(**iter_kwargs(path))
    count, start = 0, time.perf_counter()
    for _ in range(passes):
        it.reset()
        for batch in it:
            count += batch.data[0].shape[0] - batch.pad
    elapsed = time.perf_counter() - start
    own = cpu(resource.RUSAGE_SELF) - own
    it.close()
    children = cpu(resource.RUSAGE_CHILDREN) - children
    return count / elapsed, 1e6 * own / count, 1e6 * children / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rudder-bench-profile-") as folder:
        path = make_records(Path(folder), args.images)
        mean, std = np.array(MEAN, np.float32), np.array(STD, np.float32)
        builder = _BatchBuilder((3, CROP, CROP), 1, -1, True, True, False, mean,
                                np.float32(1) / std, 1)  # as iter_kwargs configures it
        dataset = RecordFileDataset(path)
        order = np.random.default_rng(0).permutation(len(dataset)).tolist()
        index_batches = [order[i:i + BATCH] for i in range(0, len(order) - BATCH + 1, BATCH)]
        records = [[dataset[i] for i in batch] for batch in index_batches]
        labels_payloads = [builder._split(batch) for batch in records]
        payloads = [payload for _, payload in labels_payloads]
        images = [decode_rgb_batch(batch) for batch in payloads]
        count = len(index_batches[0])
        flips = np.random.default_rng(1).random(count) < 0.5
        where = np.random.default_rng(2).random((count, 2))
        crops = [builder._crop_and_flip(batch, where, flips) for batch in images]

        def pillow(batch: list[bytes]) -> None:
            for payload in batch:
                np.asarray(Image.open(io.BytesIO(payload)).convert("RGB"))

        stages = [
            ("read records (one pread each)", lambda b: [dataset[i] for i in b], index_batches),
            ("split headers / payloads", builder._split, records),
            ("decode JPEG (libjpeg-turbo)", decode_rgb_batch, payloads),
            ("crop + mirror, whole batch", lambda b: builder._crop_and_flip(b, where, flips),
             images),
            ("normalise (training process)", builder.normalise, crops),
        ]
        print(f"{args.images} 32x32 JPEGs, batch {BATCH}, load {os.getloadavg()[0]:.1f}")
        print(f"{'stage':34s} {'us/image':>9s}")
        total = 0.0
        for name, work, batches in stages:
            cost = per_image(work, batches, args.rounds)
            total += cost
            print(f"{name:34s} {cost:9.2f}")
        print(f"{'sum of the stages':34s} {total:9.2f}")
        print(f"{'(Pillow decode, for comparison)':34s} "
              f"{per_image(pillow, payloads, args.rounds):9.2f}")
        rate, own, workers = loader_split(path)
        print(f"whole iterator, 2 workers: {rate:.0f} images/s; CPU us/image: training "
              f"process {own:.1f} + workers {workers:.1f} = {own + workers:.1f}")


if __name__ == "__main__":
    main()
