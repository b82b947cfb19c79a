"""DataLoader worker processes: shared-memory batches, errors, seeding, no leaks."""

from __future__ import annotations

import os

import numpy as np
import pytest

import engine
from engine.gluon.data import DataLoader, Dataset
from engine.gluon.data.worker_pool import WorkerError


class Draws(Dataset):
    """Each sample is a random draw made where the sample is built."""

    def __len__(self):
        return 16

    def __getitem__(self, idx):
        return np.float64(engine.random.generator().random()), np.int64(os.getpid())


def shm_entries():
    return {name for name in os.listdir("/dev/shm") if name.startswith("rudder-dl-")}


def draws(num_workers, seed=None, epoch=None):
    loader = DataLoader(Draws(), batch_size=2, num_workers=num_workers, seed=seed)
    if epoch is not None:
        loader.set_epoch(epoch)
    values = [v for x, _ in loader for v in x.asnumpy().tolist()]
    loader.close()
    return values


def test_augmentations_do_not_depend_on_which_worker_builds_a_batch():
    engine.random.seed(5)
    first = draws(2)
    assert len(set(first)) == len(first) == 16  # workers do not share one stream
    engine.random.seed(5)
    assert draws(2) == first
    engine.random.seed(5)
    assert draws(3) == first  # per-batch seeds: the worker count does not matter


def test_a_seeded_loader_replays_an_epochs_augmentations():
    engine.random.seed(1)
    epoch3 = draws(2, seed=42, epoch=3)
    engine.random.seed(99)  # the engine's generator does not matter with a loader seed
    assert draws(1, seed=42, epoch=3) == epoch3
    assert draws(2, seed=42, epoch=4) != epoch3


def test_a_failing_sample_reports_the_workers_traceback():
    class Broken(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, idx):
            if idx == 3:
                raise KeyError("sample 3 is missing")
            return np.float32(idx)

    loader = DataLoader(Broken(), batch_size=2, num_workers=1)
    with pytest.raises(WorkerError, match="sample 3 is missing"):
        list(loader)
    loader.close()


def test_batches_of_arbitrary_objects_need_the_thread_pool():
    # numbers, strings, lists, tuples and dicts come back from worker processes (see
    # test_dataloader_batches_against_mxnet); other objects only from worker threads
    class Things(Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, idx):
            return "word" if idx == 0 else Dataset()

    loader = DataLoader(Things(), batch_size=2, num_workers=1, batchify_fn=list)
    with pytest.raises(WorkerError, match="use thread_pool=True"):
        list(loader)
    loader.close()
    threads = DataLoader(Things(), batch_size=2, num_workers=1, batchify_fn=list,
                         thread_pool=True)
    [batch] = list(threads)
    assert batch[0] == "word" and isinstance(batch[1], Dataset)


def test_no_shared_memory_is_left_behind_after_an_abandoned_pass():
    before = shm_entries()
    loader = DataLoader(Draws(), batch_size=2, num_workers=2, prefetch=6)
    for i, _ in enumerate(loader):
        if i == 1:
            break  # six more batches are in flight
    assert len(list(loader)) == 8  # the next pass ignores the old pass's batches
    loader.close()
    assert shm_entries() - before == set()


def _load_in_a_daemon(connection):
    loader = DataLoader(Draws(), batch_size=4, num_workers=2)
    batches = [x.shape[0] for x, _ in loader]
    connection.send((batches, loader._processes is None))


def test_a_daemon_process_falls_back_to_threads():
    import multiprocessing

    context = multiprocessing.get_context("fork")
    reader, writer = context.Pipe(duplex=False)
    child = context.Process(target=_load_in_a_daemon, args=(writer,), daemon=True)
    child.start()
    assert reader.poll(60)
    batches, used_threads = reader.recv()
    child.join(10)
    assert batches == [4, 4, 4, 4] and used_threads  # daemons may not have children


def _start_loader_and_report(connection):
    loader = DataLoader(Draws(), batch_size=2, num_workers=2)
    next(iter(loader))
    connection.send(loader._processes.pids)
    import time

    time.sleep(60)  # killed by the test long before


def test_workers_end_when_their_parent_is_killed():
    import multiprocessing
    import signal
    import time

    context = multiprocessing.get_context("fork")
    reader, writer = context.Pipe(duplex=False)
    parent = context.Process(target=_start_loader_and_report, args=(writer,))
    parent.start()
    assert reader.poll(60)
    workers = reader.recv()
    os.kill(parent.pid, signal.SIGKILL)
    parent.join(10)

    def alive(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().split(") ")[1][0] != "Z"  # a zombie is dead
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 10
    try:
        while any(alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(p) for p in workers)
    finally:  # orphans would hold pytest's output open
        for pid in workers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        # a SIGKILLed loader cannot remove its workers' shared-memory slots: do it here
        for name in os.listdir("/dev/shm"):
            if name.startswith(f"rudder-dl-{parent.pid}-"):
                os.unlink(os.path.join("/dev/shm", name))


def test_a_pool_started_in_a_passing_thread_outlives_the_thread():
    import threading

    loader = DataLoader(Draws(), batch_size=2, num_workers=2)
    first = []
    thread = threading.Thread(target=lambda: first.append(next(iter(loader))))
    thread.start()
    thread.join()
    assert len(list(loader)) == 8  # the workers forked by the ended thread still serve
    loader.close()
