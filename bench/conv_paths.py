"""The engine's convolution paths, layer by layer: im2col, Winograd F(2x2, 3x3), Winograd
F(4x4, 3x3), and for maps of at most 2x2 the layer's dense matrix (engine/ndarray/dense_map.py).

For the 3x3 convolutions of issue 11's CNN and of ResNet-18 (bench/engine_cnn.py), times one
forward and one backward (data, weight and bias gradients; none for the data of a 3-channel
network input) by each path, forced with the thresholds of engine/ndarray/winograd.py and
winograd4.py (and dense_map.applies), and marks the path the engine picks by itself. Each
time includes the layer's weight preparation (a filter transform, the dense matrix), which
a hybridized forward makes ahead on another thread. Times are CPU seconds of this
thread (so other processes on a shared machine weigh less), the minimum over interleaved
rounds; with ``--threads`` above 1, wall-clock seconds (this thread's CPU time would leave
out the work of the engine's other threads).

Usage: python bench/conv_paths.py [--nets cnn,resnet18,resnet18_v1] [--rounds 5] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from threads import cap_threads  # noqa: E402

THREADS = cap_threads()

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import autograd, nd  # noqa: E402
from engine.ndarray import dense_map, winograd, winograd4  # noqa: E402
from engine.ndarray.ndarray import NDArray  # noqa: E402

# (batch, in channels, size, filters) of each 3x3 stride-1 padding-1 convolution
LAYERS = {"cnn": [(64, 3, 32, 32), (64, 32, 16, 64), (64, 64, 8, 128)],
          "resnet18": [(16, 3, 32, 64), (16, 64, 32, 64), (16, 128, 16, 128),
                       (16, 256, 8, 256), (16, 512, 4, 512)],
          # model-zoo resnet18_v1 on 3x32x32 (bench/engine_zoo.py): its stem leaves 8x8 maps
          "resnet18_v1": [(32, 64, 8, 64), (32, 128, 4, 128), (32, 256, 2, 256),
                          (32, 512, 1, 512)]}


def time_layer(n: int, c: int, size: int, f: int, reps: int = 5) -> tuple[float, float]:
    """Minimum ms of a forward and of a backward (gradients arrive channels-last, as the
    engine's BatchNorm/Activation/Pooling hand them back): CPU ms of this thread on one
    engine thread, wall-clock ms on several."""
    clock = time.thread_time if THREADS == 1 else time.perf_counter
    rng = np.random.default_rng(0)
    x = NDArray(rng.standard_normal((n, c, size, size)).astype(np.float32))
    w = NDArray((rng.standard_normal((f, c, 3, 3)) * 0.1).astype(np.float32))
    b = NDArray(np.zeros(f, np.float32))
    for arr in (w, b) if c == 3 else (x, w, b):
        arr.attach_grad()
    g = NDArray(np.ones((n, size, size, f), np.float32).transpose(0, 3, 1, 2))
    fwd, bwd = [], []
    for _ in range(reps):
        t0 = clock()
        with autograd.record():
            y = nd.Convolution(x, w, b, kernel=(3, 3), pad=(1, 1), num_filter=f)
        t1 = clock()
        y.backward(g)
        fwd.append(t1 - t0)
        bwd.append(clock() - t1)
    return min(fwd) * 1e3, min(bwd) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default="cnn,resnet18")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    chosen = (winograd.MIN_HARMONIC_CHANNELS, winograd.MIN_TILES, winograd4.MIN_TILES)
    # (F(2x2) channel and tile thresholds, F(4x4) tile threshold) that force each path
    forced = {"im2col": (10 ** 9, 1, 1), "F(2x2)": (1, 1, 10 ** 9), "F(4x4)": (1, 1, 1),
              "dense": None}
    dense_applies = dense_map.applies
    print(f"{'layer (N, C, HxW, F)':<32} " + " ".join(f"{path + ' fwd/bwd ms':>20}"
                                                       for path in forced) + "  engine picks")
    for net in args.nets.split(","):
        for n, c, size, f in LAYERS[net]:
            shape = (n, size, size, c)
            picks = "im2col"
            if size == 1:  # every path runs the one kernel position that reads data
                picks = "single tap"
            elif dense_applies((size, size), (3, 3)):
                picks = "dense"
            elif winograd.applies(np, (3, 3), (1, 1), (1, 1), 1, shape, f, (1, 1)):
                picks = "F(4x4)" if winograd4.tile_count(shape, (1, 1)) >= winograd4.MIN_TILES \
                    else "F(2x2)"
            best: dict[str, tuple[float, float]] = {}
            for _ in range(args.rounds):
                for path, thresholds in forced.items():
                    if thresholds is None:  # the dense matrix: (H·W·C)² floats, small maps only
                        if size > 2:
                            best[path] = (np.nan, np.nan)
                            continue
                        dense_map.applies = lambda *_: True
                    else:
                        dense_map.applies = lambda *_: False
                        channels, tiles, tiles4 = thresholds
                        winograd.MIN_HARMONIC_CHANNELS, winograd.MIN_TILES = channels, tiles
                        winograd4.MIN_TILES = tiles4
                    got = time_layer(n, c, size, f)
                    old = best.get(path, (np.inf, np.inf))
                    best[path] = (min(old[0], got[0]), min(old[1], got[1]))
            winograd.MIN_HARMONIC_CHANNELS, winograd.MIN_TILES, winograd4.MIN_TILES = chosen
            dense_map.applies = dense_applies
            layer = f"{net} ({n}, {c}, {size}x{size}, {f})"
            print(f"{layer:<32} " + " ".join(f"{fw:10.2f} / {bw:7.2f}"
                                             for fw, bw in best.values()) + f"   {picks}",
                  flush=True)

if __name__ == "__main__":
    main()
