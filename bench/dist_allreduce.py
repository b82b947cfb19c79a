"""Allreduce bandwidth: the engine's dist kvstore against torch.distributed (Gloo) called
directly, in the same 2-rank run on this machine (loopback).

For 1, 16 and 64 MiB of float32, every round times ``kv.pushpull(key, array)`` (the
engine: a zero-copy allreduce of the NDArray's buffer plus the copy MXNet's semantics need
in the store) and ``torch.distributed.all_reduce`` on a tensor of the same size, in turn
(each first in every other round), so load on the shared machine hits both alike. A 1 MiB
reduction takes ~1.5 ms here and its time swings 2x from call to call, hence 60 rounds by
default. Bandwidth is bytes / median time (algorithm
bandwidth); target: engine >= 0.9x torch.

Usage: python bench/dist_allreduce.py [--sizes 1,16,64] [--rounds 60] [--ranks 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,16,64", help="MiB, comma-separated")
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--ranks", type=int, default=2)
    return parser.parse_args()


def launch(args: argparse.Namespace) -> int:
    from engine.launch import free_port, rank_env

    port, torch_port = free_port(), free_port()
    procs = []
    for rank in range(args.ranks):
        env = rank_env(dict(os.environ), rank, args.ranks, "127.0.0.1", port, None)
        env.update({"BENCH_TORCH_PORT": str(torch_port), "OMP_NUM_THREADS": "1",
                    "OPENBLAS_NUM_THREADS": "1"})
        procs.append(subprocess.Popen([sys.executable, __file__, *sys.argv[1:]], env=env))
    return max(abs(p.wait()) for p in procs)


def run_rank(args: argparse.Namespace) -> None:
    import numpy as np
    import torch
    import torch.distributed as dist

    import engine as mx

    kv = mx.kv.create("dist_sync")
    rank, size = kv.rank, kv.num_workers
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['BENCH_TORCH_PORT']}",
                            rank=rank, world_size=size, timeout=timedelta(seconds=120))
    if rank == 0:
        print(f"{size} ranks on {os.cpu_count()} cores, Gloo over loopback, {args.rounds} "
              f"interleaved rounds (median)", flush=True)
        print(f"{'MiB':>4} {'torch ms':>9} {'engine ms':>10} {'torch GB/s':>11} "
              f"{'engine GB/s':>12} {'engine/torch':>13}")
    for key, mib in enumerate(int(s) for s in args.sizes.split(",")):
        count = mib << 18
        tensor = torch.from_numpy(np.ones(count, np.float32))
        array = mx.nd.ones((count,))
        kv.init(key, mx.nd.zeros((count,)))
        times: dict[str, list[float]] = {"torch": [], "engine": []}
        for round_ in range(args.rounds + 1):
            # each goes first in every other round: the first collective after a barrier
            # also absorbs the ranks' skew leaving it
            for name in ("torch", "engine") if round_ % 2 else ("engine", "torch"):
                kv.barrier()
                began = time.perf_counter()
                if name == "torch":
                    dist.all_reduce(tensor)
                else:
                    kv.pushpull(key, array)
                if round_:  # the first round warms up
                    times[name].append(time.perf_counter() - began)
        if rank == 0:
            torch_s, engine_s = (statistics.median(times[n]) for n in ("torch", "engine"))
            nbytes = count * 4
            print(f"{mib:>4} {torch_s * 1e3:9.1f} {engine_s * 1e3:10.1f} "
                  f"{nbytes / torch_s / 1e9:11.2f} {nbytes / engine_s / 1e9:12.2f} "
                  f"{torch_s / engine_s:13.2f}", flush=True)
    kv.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    arguments = parse()
    if "DMLC_TASK_ID" in os.environ:
        run_rank(arguments)
    else:
        sys.exit(launch(arguments))
