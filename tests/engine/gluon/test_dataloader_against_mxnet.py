"""gluon.data.DataLoader's constructor arguments against MXNet 1.9.1: samplers, batch
samplers, last_batch modes, batchify_fn, worker threads (num_workers, thread_pool, prefetch),
auto_reload/refresh/clean, and the argument errors."""

import os
import threading
import time

import numpy as np
import pytest

import engine
from tests.engine.gluon.differential import compare, oracle_results
from tests.oracle import needs_mxnet

pytestmark = needs_mxnet

INPUTS = {"x": np.arange(22, dtype=np.float32).reshape(11, 2),
          "y": np.arange(11, dtype=np.float32)}

CASES = {
    "loaders": """
        D = gluon.data
        ds = D.ArrayDataset(inputs["x"], inputs["y"])
        def labels(loader):
            return [b[1].asnumpy().tolist() for b in loader]
        def pairs(batch):
            return nd.array([s[0].sum() if hasattr(s[0], "sum") else sum(s[0]) for s in batch])
        loaders = {
            "keep": D.DataLoader(ds, batch_size=4),
            "discard": D.DataLoader(ds, batch_size=4, last_batch="discard"),
            "rollover": D.DataLoader(ds, batch_size=4, last_batch="rollover"),
            "sampler": D.DataLoader(ds, batch_size=3, sampler=D.SequentialSampler(6, start=5)),
            "batch_sampler": D.DataLoader(ds, batch_sampler=D.BatchSampler(
                D.FilterSampler(lambda s: s[1] % 2 == 0, ds), 2, "keep")),
            "workers": D.DataLoader(ds, batch_size=3, num_workers=2),
            "threads": D.DataLoader(ds, batch_size=3, num_workers=3, thread_pool=True,
                                    prefetch=1, timeout=30),
            "reload": D.DataLoader(ds, batch_size=5, auto_reload=True),
            "reload_workers": D.DataLoader(ds, batch_size=5, num_workers=2, thread_pool=True,
                                           auto_reload=True),
        }
        for name, loader in loaders.items():
            result[name] = [labels(loader), labels(loader), len(loader)]
        custom = D.DataLoader(ds, batch_size=4, batchify_fn=pairs, num_workers=1,
                              thread_pool=True)
        result["batchify"] = [b.asnumpy().tolist() for b in custom]
        manual = D.DataLoader(ds, batch_size=6)
        manual.refresh()
        first = labels(manual)
        manual.clean()
        result["manual"] = [first, labels(manual)]
        errors = []
        for kw in [dict(batch_sampler=D.BatchSampler(D.SequentialSampler(11), 2), batch_size=2),
                   dict(sampler=D.SequentialSampler(11), shuffle=True, batch_size=2),
                   dict()]:
            try:
                D.DataLoader(ds, **kw)
                errors.append(None)
            except ValueError:
                errors.append("ValueError")
        result["errors"] = errors
    """,
}


@pytest.fixture(scope="module")
def mxnet():
    return oracle_results(CASES, INPUTS)


def test_loader_arguments_give_the_batches_mxnet_gives(mxnet):
    ours, theirs = compare(CASES, "loaders", INPUTS, mxnet)
    for key in theirs:
        assert ours[key] == theirs[key], key


def test_workers_build_batches_in_parallel_threads_and_keep_the_order():
    seen = set()

    class Slow(engine.gluon.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, idx):
            seen.add(threading.current_thread().name)
            time.sleep(0.01)
            return np.float32(idx)

    loader = engine.gluon.data.DataLoader(Slow(), batch_size=2, num_workers=2, thread_pool=True)
    assert [b.asnumpy().tolist() for b in loader] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert seen and all(name.startswith("rudder-dataloader") for name in seen)


def test_worker_processes_build_batches_and_keep_the_order():
    class WhereAmI(engine.gluon.data.Dataset):
        def __len__(self):
            return 12

        def __getitem__(self, idx):
            time.sleep(0.005)
            return np.float32(idx), np.int64(os.getpid())

    loader = engine.gluon.data.DataLoader(WhereAmI(), batch_size=2, num_workers=2)
    for _ in range(2):  # the pool lives across passes
        batches = list(loader)
        assert [b[0].asnumpy().tolist() for b in batches] == [[2 * i, 2 * i + 1]
                                                              for i in range(6)]
        pids = {int(p) for b in batches for p in b[1].asnumpy()}
        assert os.getpid() not in pids and 1 <= len(pids) <= 2
    loader.close()


def test_a_batch_slower_than_timeout_raises():
    class Stuck(engine.gluon.data.Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, idx):
            time.sleep(0.5)
            return np.float32(idx)

    loader = engine.gluon.data.DataLoader(Stuck(), batch_size=1, num_workers=1, timeout=0.05)
    with pytest.raises(TimeoutError):
        list(loader)
