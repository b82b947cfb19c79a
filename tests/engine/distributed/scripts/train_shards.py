"""A data-parallel training script as a user writes it (MXNet's dist_sync idiom).

Each rank takes its slice of one global batch (rows ``rank::N`` ... contiguous here) and
steps with the global batch size, so N ranks must end where one rank on the whole batch
ends. Writes the final weights (and a few facts) to ``$OUT/rank<r>.npz``.

usage: train_shards.py OUT [--net mlp|cnn] [--hybridize] [--steps S] [--kvstore dist_sync]
       [--update-on-kvstore 1|0] [--optimizer adam] [--batch B] [--accumulate 1,2]
       [--ctx cpu|gpu]
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

import engine as mx
from engine import autograd, gluon


def build(net_name: str):
    net = gluon.nn.HybridSequential()
    if net_name == "cnn":
        # no BatchNorm: its batch statistics are per rank (as in MXNet), so N ranks could
        # not match one rank on the whole batch
        net.add(gluon.nn.Conv2D(8, 3, padding=1), gluon.nn.Activation("relu"),
                gluon.nn.MaxPool2D(),
                gluon.nn.Conv2D(16, 3, padding=1), gluon.nn.Activation("relu"),
                gluon.nn.GlobalAvgPool2D(), gluon.nn.Dense(10))
    else:
        net.add(gluon.nn.Dense(32, activation="relu"), gluon.nn.Dense(16, activation="tanh"),
                gluon.nn.Dense(10))
    return net


def train(args: argparse.Namespace, rank: int, workers: int, accumulate: int) -> tuple:
    """One training from the same start; (weights, trainer)."""
    mx.random.seed(100)
    net = build(args.net)
    ctx = mx.gpu(0) if args.ctx == "gpu" else mx.cpu()
    net.initialize(mx.init.Xavier(), ctx=ctx)
    if args.hybridize:
        net.hybridize()
    rng = np.random.default_rng(7)
    shape = (args.batch, 3, 8, 8) if args.net == "cnn" else (args.batch, 20)
    data = rng.standard_normal((args.steps,) + shape).astype(np.float32)
    labels = rng.integers(0, 10, (args.steps, args.batch)).astype(np.float32)
    # shapes known before the Trainer copies rank 0's weights
    net(mx.nd.array(data[0][:1], ctx=ctx))
    params = {"learning_rate": 0.01} if args.optimizer != "sgd" else \
        {"learning_rate": 0.1, "momentum": 0.9}
    update = None if args.update_on_kvstore is None else bool(args.update_on_kvstore)
    trainer = gluon.Trainer(net.collect_params(), args.optimizer, params,
                            kvstore=None if args.kvstore == "none" else args.kvstore,
                            update_on_kvstore=update)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    if accumulate > 1:
        net.collect_params().setattr("grad_req", "add")
    per_rank = args.batch // workers
    micro = per_rank // accumulate
    for step in range(args.steps):
        for k in range(accumulate):
            start = rank * per_rank + k * micro
            x = mx.nd.array(data[step][start:start + micro], ctx=ctx)
            y = mx.nd.array(labels[step][start:start + micro], ctx=ctx)
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
        trainer.step(args.batch)
        if accumulate > 1:
            net.collect_params().zero_grad()
    mx.nd.waitall()
    params = net.collect_params()
    weights = {f"w{i}": params[k].data().asnumpy() for i, k in enumerate(sorted(params.keys()))}
    return weights, trainer


def _gpu_communicators() -> list[str]:
    """The kinds of GPU communicator this rank used (NCCL, or host staging)."""
    from engine import distributed

    world = distributed.current()
    return sorted(type(c).__name__ for c in world._gpu.values()) if world is not None else []


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--net", default="mlp")
    parser.add_argument("--hybridize", action="store_true")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch", type=int, default=12)
    parser.add_argument("--kvstore", default="dist_sync")
    parser.add_argument("--update-on-kvstore", type=int, default=None)
    parser.add_argument("--optimizer", default="adam")
    parser.add_argument("--ctx", default="cpu", choices=("cpu", "gpu"))
    parser.add_argument("--accumulate", default="1",
                        help="backward passes per step (grad_req='add' when > 1); several "
                             "comma-separated: one training each, the later ones saved as "
                             "rank<r>.acc<K>.npz")
    args = parser.parse_args()

    kv = mx.kv.create(args.kvstore) if args.kvstore != "none" else None
    rank, workers = (kv.rank, kv.num_workers) if kv is not None else (0, 1)
    os.makedirs(args.out, exist_ok=True)
    for n, accumulate in enumerate(int(a) for a in args.accumulate.split(",")):
        weights, trainer = train(args, rank, workers, accumulate)
        sync = trainer._sync
        facts = {"rank": rank, "workers": workers,
                 "buckets": len(sync.reducer.buckets) if sync is not None else 0,
                 "started_in_backward": sync.reducer.started_in_backward if sync else 0,
                 "update_on_kvstore": trainer._update_on_kvstore,
                 "gpu_communicators": _gpu_communicators()}
        name = f"rank{rank}" if n == 0 else f"rank{rank}.acc{accumulate}"
        if n == 0:
            # every rank holds the same optimizer states (MXNet refuses to save them on
            # dist): saved, loaded back and saved again, they must not change
            states = os.path.join(args.out, f"{name}.states")
            trainer.save_states(states)
            trainer.load_states(states)
            trainer.save_states(states + ".again")
        np.savez(os.path.join(args.out, f"{name}.npz"), facts=np.array(json.dumps(facts)),
                 **weights)


if __name__ == "__main__":
    main()
