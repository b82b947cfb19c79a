"""Data-parallel scaling on this machine: 2 ranks (1 thread each) against 1 rank, at the
same per-rank batch, on issue 11's CNN, the 784-256-256-10 MLP and ResNet-18 (CIFAR form).

Each configuration is a fresh job (hybridized network, SoftmaxCrossEntropyLoss, Adam,
``kvstore='dist_sync'`` for the 2-rank job; the 1-rank job has no kvstore, as a user on one
machine runs it); rounds alternate 1-rank and 2-rank jobs so load on the shared machine hits
both. images/s = ranks x batch / median step time (a loaded machine lends 2 ranks no more
cores than 1: the CPU-time line says what 2 idle cores would give: twice one rank's CPU
time per step over a rank's CPU time per step in the 2-rank job, communication threads
included). "comm wait" is the share of rank 0's
step time spent blocked in ``trainer.step`` waiting for the gradient reduction (what
backward did not hide). Targets: CNN 2 ranks >= 1.8x one rank's images/s. The machine's
own 2-core ceiling (bench/machine_ceiling.py) is printed first: on a cloud VM two busy cores
may each run slower than one alone, which no reduction schedule can win back.

Usage: python bench/dist_scaling.py [--nets cnn,mlp,resnet18] [--steps 10] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import machine_ceiling  # noqa: E402

BATCH = {"cnn": 64, "mlp": 128, "resnet18": 16}
TARGET = {"cnn": 1.8}


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default="cnn,mlp,resnet18")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per job")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--net", help=argparse.SUPPRESS)  # set in the ranks' processes
    return parser.parse_args()


def build(net_name: str, nn):  # noqa: ANN001 - gluon.nn
    if net_name == "mlp":
        net = nn.HybridSequential()
        net.add(nn.Dense(256, activation="relu", in_units=784),
                nn.Dense(256, activation="relu", in_units=256), nn.Dense(10, in_units=256))
        return net
    from engine_cnn import BUILDERS

    return BUILDERS[net_name](nn)


def run_rank(net_name: str, steps: int) -> None:
    """One rank of a job (or the whole 1-rank job); rank 0 prints its timings as JSON."""
    import numpy as np

    import engine as mx
    from engine import autograd, gluon

    distributed = "DMLC_TASK_ID" in os.environ
    kv = mx.kv.create("dist_sync") if distributed else None
    rank = kv.rank if kv is not None else 0
    batch = BATCH[net_name]
    rng = np.random.default_rng(rank)
    shape = (batch, 784) if net_name == "mlp" else (batch, 3, 32, 32)
    x = mx.nd.array(rng.standard_normal(shape).astype(np.float32))
    y = mx.nd.array(rng.integers(0, 10, batch).astype(np.float32))
    mx.random.seed(0)
    net = build(net_name, gluon.nn)
    net.initialize(init="xavier")
    net.hybridize(static_alloc=True, static_shape=True)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 1e-3}, kvstore=kv)

    def step() -> None:
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(batch)

    for _ in range(3):
        step()
    reducer = trainer._sync.reducer if trainer._sync is not None else None
    waited = reducer.wait_seconds if reducer is not None else 0.0
    times = []
    cpu = time.process_time()
    for _ in range(steps):
        began = time.perf_counter()
        step()
        times.append(time.perf_counter() - began)
    cpu = (time.process_time() - cpu) / steps
    if rank == 0:
        waited = (reducer.wait_seconds - waited) if reducer is not None else 0.0
        print(json.dumps({"times": times, "wait": waited, "cpu": cpu,
                          "buckets": len(reducer.buckets) if reducer else 0}), flush=True)


def job(net_name: str, ranks: int, steps: int) -> dict:
    from engine.launch import free_port, rank_env

    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1", RUDDER_OPTIMIZER_THREADS="1")
    for name in [n for n in env if n.startswith("DMLC_")]:
        del env[name]
    command = [sys.executable, __file__, "--net", net_name, "--steps", str(steps)]
    if ranks == 1:
        outputs = [subprocess.run(command, env=env, capture_output=True, text=True,
                                  check=True).stdout]
    else:
        port = free_port()
        procs = [subprocess.Popen(command, env=rank_env(env, r, ranks, "127.0.0.1", port, None),
                                  stdout=subprocess.PIPE, text=True) for r in range(ranks)]
        outputs = [p.communicate()[0] for p in procs]
        if any(p.returncode for p in procs):
            raise SystemExit(f"a rank of the {net_name} job failed")
    return json.loads(next(o for o in outputs if o.strip()).strip().splitlines()[-1])


def main() -> None:
    args = parse()
    if args.net:
        run_rank(args.net, args.steps)
        return
    print(f"1 thread per rank, {os.cpu_count()} cores, {args.rounds} rounds of {args.steps} "
          f"steps per job (medians)", flush=True)
    print(machine_ceiling.describe(2, 3), flush=True)  # what 2 busy cores give against 1
    for net_name in args.nets.split(","):
        one: list[float] = []
        two: list[float] = []
        cpu_one: list[float] = []
        cpu_two: list[float] = []
        wait = total = 0.0
        buckets = 0
        for _ in range(args.rounds):
            single = job(net_name, 1, args.steps)
            one += single["times"]
            cpu_one.append(single["cpu"])
            result = job(net_name, 2, args.steps)
            two += result["times"]
            cpu_two.append(result["cpu"])
            wait += result["wait"]
            total += sum(result["times"])
            buckets = result["buckets"]
        batch = BATCH[net_name]
        ips_one = batch / statistics.median(one)
        ips_two = 2 * batch / statistics.median(two)
        target = f" (target >= {TARGET[net_name]}x)" if net_name in TARGET else ""
        print(f"{net_name} (batch {batch} per rank): 1 rank {ips_one:7.1f} img/s, 2 ranks "
              f"{ips_two:7.1f} img/s = {ips_two / ips_one:4.2f}x{target}; comm wait "
              f"{100 * wait / total:4.1f}% of the 2-rank step ({buckets} buckets)", flush=True)
        # what 2 free cores would give: each rank's CPU time per step against one rank's
        cpu_ratio = 2 * statistics.median(cpu_one) / statistics.median(cpu_two)
        print(f"  CPU per step: 1 rank {1e3 * statistics.median(cpu_one):.1f} ms, each of 2 "
              f"ranks {1e3 * statistics.median(cpu_two):.1f} ms -> {cpu_ratio:4.2f}x on 2 idle "
              f"cores", flush=True)


if __name__ == "__main__":
    main()
