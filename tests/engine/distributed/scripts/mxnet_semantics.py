"""One script, run as 2 workers by MXNet 1.9.1 (its own dist_sync: scheduler, server,
workers) and by Rudder's engine: what a script sees must be the same.

usage: mxnet_semantics.py OUT SCENARIO...   (ORACLE=mxnet imports mxnet instead of engine)

Scenarios (MXNet needs one launch per scenario: its servers key values by number, and a
second Trainer would re-initialise the first one's keys):
- kv: rank/num_workers, init (rank 0's value wins), push/pull of several keys, pushpull,
  the 'test' optimizer on the store, a Trainer on the same store (the gluon step check);
- trainer_kv / trainer_local: three Trainer steps of a small MLP, updating on the kvstore
  (SGD with momentum) or locally (Adam), ranks starting from different weights;
- module_kv / module_local: ``Module.fit`` on each rank's own batches with
  ``kvstore='dist_sync'``, updating on the store (SGD with momentum, rank 0's weights win)
  or, with ``MXNET_UPDATE_ON_KVSTORE=0``, on the workers (Adam on the summed gradients,
  each rank keeping its own starting weights);
- compression: 2-bit pushes (residuals, the 'test' optimizer) and a training loop of
  push gradients / pull weights with SGD on the store. Rudder also runs the same loop
  through a Trainer with compression_params (MXNet 1.9.1's Trainer refuses that
  combination on dist stores: "Compression not supported with PushPull").
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

if os.environ.get("ORACLE") == "mxnet":
    import mxnet as mx
else:
    import engine as mx

OUT, SCENARIOS = sys.argv[1], sys.argv[2:]
LOSS_SCALE = 20.0
results: dict[str, np.ndarray] = {}
facts: dict[str, object] = {}


def pulled(kv, key, shape, dtype="float32"):
    out = mx.nd.zeros(shape, dtype=dtype)
    kv.pull(key, out=out)
    return out.asnumpy()


def scenario_kv() -> None:
    kv = mx.kv.create("dist_sync")
    rank, n = kv.rank, kv.num_workers
    facts.update(rank=rank, num_workers=n, type=kv.type)
    kv.init(3, mx.nd.ones((2, 3)) * (rank + 5))
    results["kv_init"] = pulled(kv, 3, (2, 3))
    keys, shapes = [5, 7, 9], [(2, 3), (4,), (1211,)]
    kv.init(keys, [mx.nd.ones(s) for s in shapes])
    kv.push(keys, [mx.nd.ones(s) * (rank + 1) for s in shapes])
    for k, s in zip(keys, shapes, strict=True):
        results[f"kv_push_{k}"] = pulled(kv, k, s)
    kv.push(5, [mx.nd.ones((2, 3)) * 0.5, mx.nd.ones((2, 3)) * (rank + 2)])  # two devices
    results["kv_push_devices"] = pulled(kv, 5, (2, 3))
    out = mx.nd.zeros((4,))
    kv.pushpull(7, mx.nd.arange(4) * (rank + 1), out=out)
    results["kv_pushpull"] = out.asnumpy()
    value = mx.nd.ones((4,)) * (rank + 3)
    kv.pushpull(7, value)
    results["kv_pushpull_inplace"] = value.asnumpy()
    kv.init([11, 12], [mx.nd.ones((2, 3)), mx.nd.ones((1200, 10), dtype="float16")])
    kv.set_optimizer(mx.optimizer.create("test", rescale_grad=2))
    for i in range(3):  # MXNet's nightly dist_sync check: w = 1 + rate·n(n+1)/2·(i+1)
        kv.push(11, mx.nd.ones((2, 3)) * (rank + 1))
        results[f"kv_test_opt_{i}"] = pulled(kv, 11, (2, 3))
        kv.push(12, mx.nd.ones((1200, 10), dtype="float16") * (rank + 1))
        results[f"kv_test_opt16_{i}"] = pulled(kv, 12, (1200, 10), "float16")
    kv._barrier()  # MXNet 1.9.1's spelling (Rudder has barrier() too)
    # a Trainer on this store: grad = rank+1 everywhere, step(1): w = 1 - n(n+1)/2
    x = mx.gluon.Parameter("x", shape=(10, 1))
    x.initialize(ctx=mx.cpu(0), init="ones")
    trainer = mx.gluon.Trainer([x], "sgd", {"learning_rate": 1.0, "multi_precision": False},
                               kvstore=kv)
    with mx.autograd.record():
        y = (rank + 1) * x.data(mx.cpu(0))
        y.backward()
    trainer.step(1)
    results["kv_gluon_step"] = x.data(mx.cpu(0)).asnumpy()
    facts["gluon_update_on_kvstore"] = bool(trainer._update_on_kvstore)
    with mx.autograd.record():  # another batch size: the store's scaling cannot follow
        y = (rank + 1) * x.data(mx.cpu(0))
        y.backward()
    try:
        trainer.step(2)
        facts["batch_change"] = "no error"
    except UserWarning as err:
        facts["batch_change"] = str(err)
    if os.environ.get("ORACLE") != "mxnet":  # dist_async: MXNet's Trainer rules hold
        async_kv = mx.kv.create("dist_async")
        modes = {}
        for update in (None, True, False):
            w = mx.gluon.Parameter("w", shape=(2,))
            w.initialize(init="ones")
            try:
                trainer = mx.gluon.Trainer([w], "sgd", {"learning_rate": 1.0},
                                           kvstore=async_kv, update_on_kvstore=update)
                trainer._init_kvstore()
                modes[str(update)] = trainer._update_on_kvstore
            except ValueError as err:
                modes[str(update)] = str(err)
        facts["async_update_on_kvstore"] = modes
    if os.environ.get("ORACLE") != "mxnet":  # Rudder's step-boundary exchange
        control, sums = kv.exchange(control=b'{"set_lr": 0.5}' if rank == 0 else b"mine",
                                    values=[rank + 1.0, 10.0])
        facts["exchange_control"] = control.decode()
        results["exchange_sums"] = sums


def mlp_and_data(rank: int, in_units: int = 6, weights_of: int | None = None):
    net = mx.gluon.nn.HybridSequential()
    net.add(mx.gluon.nn.Dense(8, activation="relu", in_units=in_units),
            mx.gluon.nn.Dense(3, in_units=8))
    net.initialize(mx.init.Zero())
    # different on each rank (rank 0's must win), unless ``weights_of`` picks one rank's
    init = np.random.RandomState(10 + (rank if weights_of is None else weights_of))
    params = [net.collect_params()[k] for k in sorted(net.collect_params().keys())]
    for p in params:
        p.set_data(mx.nd.array(init.uniform(-0.5, 0.5, p.shape)))
    data = np.random.RandomState(1000 + rank)
    batches = [(mx.nd.array(data.standard_normal((4, in_units))),
                mx.nd.array(data.standard_normal((4, 3)))) for _ in range(3)]
    return net, params, batches


def train(trainer, net, batches, scale: float = 1.0) -> None:
    loss_fn = mx.gluon.loss.L2Loss()
    for x, y in batches:
        with mx.autograd.record():
            loss = scale * loss_fn(net(x), y)
        loss.backward()
        trainer.step(4)
        mx.nd.waitall()  # MXNet: let each step's communication finish before the next


def scenario_trainer(update_on_kvstore: bool) -> None:
    kv = mx.kv.create("dist_sync")
    facts["rank"] = kv.rank
    net, params, batches = mlp_and_data(kv.rank)
    optimizer, opt_params = ("sgd", {"learning_rate": 0.1, "momentum": 0.9}) \
        if update_on_kvstore else ("adam", {"learning_rate": 0.01})
    trainer = mx.gluon.Trainer(net.collect_params(), optimizer, opt_params, kvstore=kv,
                               update_on_kvstore=update_on_kvstore)
    train(trainer, net, batches)
    tag = "trainer_kv" if update_on_kvstore else "trainer_local"
    for i, p in enumerate(params):
        results[f"{tag}_w{i}"] = p.data().asnumpy()
    facts[f"{tag}_update_on_kvstore"] = bool(trainer._update_on_kvstore)


def scenario_compression() -> None:
    kv = mx.kv.create("dist_sync")
    rank, n = kv.rank, kv.num_workers
    facts["rank"] = rank
    kv.set_gradient_compression({"type": "2bit", "threshold": 0.5})
    kv.init([20, 21], [mx.nd.zeros((2, 3)), mx.nd.zeros((1211,))])
    kv.init(22, mx.nd.ones((2, 3)))
    results["compr_pull_before_push"] = pulled(kv, 20, (2, 3))
    results["compr_init_uncompressed"] = pulled(kv, 22, (2, 3))
    kv.set_optimizer(mx.optimizer.create("test", rescale_grad=2))
    for i, g in enumerate((0.4, 0.1, 0.2, 0.3, 0.5)):  # below θ, θ with residual, ...
        kv.push([20, 21], [mx.nd.ones((2, 3)) * g, mx.nd.ones((1211,)) * g * (rank + 1)])
        results[f"compr_seq_{i}"] = pulled(kv, 20, (2, 3))
        results[f"compr_seq_big_{i}"] = pulled(kv, 21, (1211,))
    noise = np.random.RandomState(5 + rank)
    for i in range(3):
        kv.push(21, mx.nd.array(noise.uniform(-1, 1, 1211)))
        results[f"compr_random_{i}"] = pulled(kv, 21, (1211,))
    # training: push gradients, SGD on the store, pull weights (the loss is scaled up so
    # the gradients are a few θ: some elements travel, the rest wait in the residuals)
    net, params, batches = mlp_and_data(rank)
    keys = list(range(100, 100 + len(params)))
    kv.init(keys, [p.data() for p in params])
    for k, p in zip(keys, params, strict=True):
        kv.pull(k, out=p.data())
    kv.set_optimizer(mx.optimizer.create("sgd", learning_rate=0.01, rescale_grad=0.25))
    for x, y in batches:
        with mx.autograd.record():
            loss = LOSS_SCALE * mx.gluon.loss.L2Loss()(net(x), y)
        loss.backward()
        for k, p in zip(keys, params, strict=True):
            kv.push(k, p.grad())
        for k, p in zip(keys, params, strict=True):
            kv.pull(k, out=p.data())
    for i, p in enumerate(params):
        results[f"compr_train_w{i}"] = p.data().asnumpy()
    if os.environ.get("ORACLE") != "mxnet":  # the same through a Trainer (Rudder only)
        # from rank 0's weights on every rank, as the loop above (which pulled them before
        # its first gradient; a Trainer broadcasts them at its first step, after it)
        net, params, batches = mlp_and_data(rank, weights_of=0)
        trainer = mx.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01},
                                   kvstore="dist_sync", update_on_kvstore=True,
                                   compression_params={"type": "2bit", "threshold": 0.5})
        train(trainer, net, batches, LOSS_SCALE)
        for i, p in enumerate(params):
            results[f"compr_trainer_w{i}"] = p.data().asnumpy()
    facts["compr_n"] = n


def scenario_module(update_on_kvstore: bool) -> None:
    os.environ["MXNET_UPDATE_ON_KVSTORE"] = "1" if update_on_kvstore else "0"
    kv = mx.kv.create("dist_sync")
    rank = kv.rank
    facts["rank"] = rank
    data = mx.sym.Variable("data")
    hidden = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=8, name="fc1"),
                               act_type="relu")
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(hidden, num_hidden=3, name="fc2"),
                               name="softmax")
    arg_shapes, _, _ = net.infer_shape(data=(4, 6))
    init = np.random.RandomState(20 + rank)  # different on each rank
    arg_params = {name: mx.nd.array(init.uniform(-0.5, 0.5, shape))
                  for name, shape in zip(net.list_arguments(), arg_shapes, strict=True)
                  if name not in ("data", "softmax_label")}
    rows = np.random.RandomState(3000 + rank)  # this rank's shard of the data
    train = mx.io.NDArrayIter(rows.standard_normal((12, 6)).astype(np.float32),
                              rows.randint(0, 3, 12).astype(np.float32), batch_size=4,
                              label_name="softmax_label")
    mod = mx.mod.Module(net, context=mx.cpu())
    optimizer, opt_params = ("sgd", {"learning_rate": 0.1, "momentum": 0.9}) \
        if update_on_kvstore else ("adam", {"learning_rate": 0.01})
    mod.fit(train, kvstore=kv, optimizer=optimizer, optimizer_params=opt_params,
            arg_params=arg_params, num_epoch=2)
    tag = "module_kv" if update_on_kvstore else "module_local"
    weights, _ = mod.get_params()
    for name in sorted(weights):
        results[f"{tag}_{name}"] = weights[name].asnumpy()
    facts[f"{tag}_rescale_grad"] = float(mod._optimizer.rescale_grad)


for name in SCENARIOS:
    if name == "kv":
        scenario_kv()
    elif name in ("trainer_kv", "trainer_local"):
        scenario_trainer(name == "trainer_kv")
    elif name in ("module_kv", "module_local"):
        scenario_module(name == "module_kv")
    elif name == "compression":
        scenario_compression()
    else:
        raise SystemExit(f"unknown scenario {name}")
rank = int(facts["rank"])  # MXNet's scheduler numbers the workers in its own order
os.makedirs(OUT, exist_ok=True)
np.savez(os.path.join(OUT, f"rank{rank}.npz"), facts=np.array(json.dumps(facts)), **results)
