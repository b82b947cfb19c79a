"""Worker processes for the DataLoader: batches come back through shared memory.

Python threads cannot decode and augment images in parallel (the per-sample work holds the
GIL), so ``DataLoader(num_workers=N)`` forks N processes. They inherit the dataset (no
pickling of it or of its samples); the parent sends only lists of indices over a local
queue, and each worker writes its batch's arrays into one of its POSIX shared-memory
blocks (a ring, reused) and answers over a pipe with the block's name and the arrays'
layout (dtypes, shapes, nesting), all plain values. The parent copies the arrays out of
its own long-lived mapping of the block. A worker never gets far enough ahead to reuse a
block whose batch the parent has not read.

Before each batch the worker reseeds ``engine.random`` (and numpy's and Python's global
generators) from the pass's seed and the batch's number, both chosen by the parent, so a
batch's random augmentations do not depend on which worker builds it: they repeat under
``engine.random.seed``, and with a seeded DataLoader they are a pure function of
(seed, epoch, batch), so a job resumed mid-epoch sees the same batches.
"""

from __future__ import annotations

import _posixshmem
import ctypes
import mmap
import multiprocessing
import os
import random as _py_random
import secrets
import signal
import threading
import traceback
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from typing import Any

import numpy

from ... import random as _random
from ...context import cpu
from ...ndarray.ndarray import NDArray

_CPU = cpu()  # one context object for all the arrays made here (not one per image)

# a leaf of the batch layout: ("nd" | "np", dtype string, shape, byte offset)
Layout = Any


class WorkerError(RuntimeError):
    """A worker process raised while building a batch; the message has its traceback."""


def processes_available() -> bool:
    """Whether this process may fork DataLoader workers (Linux fork; not a daemon, such as a
    Celery prefork child, which may not have children)."""
    return ("fork" in multiprocessing.get_all_start_methods()
            and not multiprocessing.current_process().daemon)


def _flatten(batch: Any, leaves: list[numpy.ndarray]) -> Layout:
    if isinstance(batch, NDArray):
        leaves.append(numpy.ascontiguousarray(batch.asnumpy()))
        return ("nd", len(leaves) - 1)
    if isinstance(batch, (numpy.ndarray, numpy.generic)):
        leaves.append(numpy.ascontiguousarray(batch))
        return ("np", len(leaves) - 1)
    if isinstance(batch, (list, tuple)):
        kind = "list" if isinstance(batch, list) else "tuple"
        return (kind, [_flatten(item, leaves) for item in batch])
    if isinstance(batch, dict):
        return ("dict", [(key, _flatten(item, leaves)) for key, item in batch.items()])
    if batch is None or isinstance(batch, _PLAIN):
        return ("value", batch)  # travels in the layout itself
    raise TypeError(
        f"a DataLoader worker process can return arrays (NDArray or numpy), numbers, strings "
        f"and lists, tuples or dicts of them, got {type(batch).__name__}; use "
        f"thread_pool=True for other batch types")


# values a batch may hold besides arrays: they go back to the parent inside the layout
_PLAIN = (bool, int, float, complex, str, bytes)


def _unflatten(layout: Layout, arrays: list[numpy.ndarray]) -> Any:
    kind, value = layout
    if kind == "nd":
        return NDArray(arrays[value], _CPU)
    if kind == "np":
        return arrays[value]
    if kind == "value":
        return value
    if kind == "dict":
        return {key: _unflatten(item, arrays) for key, item in value}
    items = [_unflatten(item, arrays) for item in value]
    return items if kind == "list" else tuple(items)


class _Slots:
    """A worker's ring of reusable shared-memory blocks (writing into fresh tmpfs pages
    for every batch cost more than the copy the parent makes out of a reused one)."""

    def __init__(self, prefix: str, count: int) -> None:
        self._prefix = prefix
        self._count = count
        self._next = 0
        self._maps: dict[str, mmap.mmap] = {}

    def write(self, batch: Any) -> tuple[str, Layout, list[tuple[str, tuple[int, ...], int]]]:
        leaves: list[numpy.ndarray] = []
        layout = _flatten(batch, leaves)
        specs, size = [], 0
        for leaf in leaves:
            specs.append((leaf.dtype.str, tuple(leaf.shape), size))
            size += (leaf.nbytes + 63) // 64 * 64  # keep every array 64-byte aligned
        name = f"{self._prefix}-{self._next}"
        self._next = (self._next + 1) % self._count
        mapping = self._maps.get(name)
        if mapping is None or len(mapping) < size:
            if mapping is not None:
                mapping.close()
            fd = _posixshmem.shm_open(name, os.O_CREAT | os.O_RDWR, mode=0o600)
            try:
                os.ftruncate(fd, max(size, 1))
                mapping = self._maps[name] = mmap.mmap(fd, max(size, 1))
            finally:
                os.close(fd)
        for leaf, (_, _, start) in zip(leaves, specs, strict=True):
            target = numpy.ndarray(leaf.shape, leaf.dtype, buffer=mapping, offset=start)
            target[...] = leaf
            del target  # the mapping cannot be closed or resized while an array uses it
        return name, layout, specs


class _SlotReader:
    """The parent's mappings of the workers' slots, kept open; batches are copied out."""

    def __init__(self) -> None:
        self._maps: dict[str, mmap.mmap] = {}

    def read(self, name: str, layout: Layout,
             specs: list[tuple[str, tuple[int, ...], int]]) -> Any:
        end = max((start + numpy.dtype(dtype).itemsize * int(numpy.prod(shape))
                   for dtype, shape, start in specs), default=0)
        mapping = self._maps.get(name)
        if mapping is None or len(mapping) < end:  # new, or grown by the worker
            fd = _posixshmem.shm_open(name, os.O_RDWR, mode=0o600)
            try:
                mapping = self._maps[name] = mmap.mmap(fd, os.fstat(fd).st_size)
            finally:
                os.close(fd)
        arrays = [numpy.frombuffer(mapping, numpy.dtype(dtype), int(numpy.prod(shape)), start)
                  .reshape(shape).copy() for dtype, shape, start in specs]
        return _unflatten(layout, arrays)

    def close(self) -> None:
        for mapping in self._maps.values():
            mapping.close()
        self._maps.clear()


def _remove_blocks(prefix: str) -> None:
    """Unlink every block of a pool (batches never taken, or left by a dead worker)."""
    folder, stem = "/dev/shm", prefix.lstrip("/")
    if not os.path.isdir(folder):
        return
    for entry in os.listdir(folder):
        if entry.startswith(stem + "-"):
            try:
                _posixshmem.shm_unlink("/" + entry)
            except FileNotFoundError:
                pass


def batch_seed(pass_seed: int, number: int) -> int:
    """The seed of batch ``number`` of a pass (a 63-bit int from both)."""
    state = numpy.random.SeedSequence([pass_seed, number]).generate_state(2, numpy.uint32)
    return int((int(state[0]) << 31) ^ int(state[1]))


def _seed_everything(seed: int) -> None:
    _random.seed(seed)
    numpy.random.seed(seed % 2**32)
    _py_random.seed(seed)


def _die_with(parent: int, forked_by_main_thread: bool) -> None:
    """End this worker when ``parent`` dies, even by SIGKILL (nothing else would: it waits
    on a task pipe whose write end it inherited, so it never sees end-of-file).

    Linux sends the signal when the *thread* that forked exits, so it is only asked for
    when that thread is the main one (a pool started from a short-lived thread would
    otherwise lose its workers with the thread).
    """
    if not forked_by_main_thread:
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(0)


def _worker_loop(make_batch: Callable[[list[int]], Any], tasks: Any, results: Connection,
                 prefix: str, slots_count: int, parent: int, main_thread: bool) -> None:
    _die_with(parent, main_thread)
    slots = _Slots(prefix, slots_count)
    if hasattr(os, "SCHED_BATCH"):
        # a worker woken by a new task must not preempt the training loop that sent it:
        # with Linux's wakeup preemption the loop lost its core for the whole batch build
        # (~4 ms of every step on a busy 2-core machine); SCHED_BATCH keeps the worker's
        # fair share of the CPU but gives up that preemption
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    while True:
        task = tasks.get()
        if task is None:
            return
        key, indices, seed = task
        try:
            _seed_everything(seed)
            results.send((key, *slots.write(make_batch(indices))))
        except Exception:  # the parent re-raises it with the traceback
            results.send((key, None, traceback.format_exc(), None))


class ProcessPool:
    """``num_workers`` forked processes that turn index lists into batches."""

    def __init__(self, make_batch: Callable[[list[int]], Any], num_workers: int,
                 ahead: int) -> None:
        """``ahead``: the most batches the caller submits beyond the one it reads next."""
        # Blocks are named after the pool, so that shutdown (or, failing that, interpreter
        # exit) can remove any left behind. multiprocessing's resource tracker is not used:
        # each registration is a message to its process, and under load unregistering a
        # block took ~20 ms of the training loop's time per batch.
        self._prefix = f"/rudder-dl-{os.getpid()}-{secrets.token_hex(4)}"
        self._cleanup = weakref.finalize(self, _remove_blocks, self._prefix)
        context = multiprocessing.get_context("fork")
        # no feeder threads: a Queue's feeder thread in a worker waits for the GIL while the
        # worker builds its next batch, which delayed finished batches by up to tens of ms
        self._tasks = context.SimpleQueue()
        main_thread = threading.current_thread() is threading.main_thread()
        self._workers = []
        self._results: list[Connection] = []
        for i in range(num_workers):
            reader, writer = context.Pipe(duplex=False)
            worker = context.Process(target=_worker_loop, daemon=True,
                                     args=(make_batch, self._tasks, writer,
                                           f"{self._prefix}-w{i}", ahead + 2, os.getpid(),
                                           main_thread),
                                     name=f"rudder-dataloader-{i}")
            worker.start()
            writer.close()
            self._workers.append(worker)
            self._results.append(reader)
        self._reader = _SlotReader()
        self._generation = 0
        self._ready: dict[tuple[int, int], tuple[Any, ...]] = {}

    def new_pass(self) -> int:
        """Start a pass: results of an abandoned earlier pass are dropped when they arrive."""
        self._generation += 1
        for key in [k for k in self._ready if k[0] != self._generation]:
            _discard_ready(self._ready.pop(key))
        return self._generation

    def submit(self, generation: int, number: int, indices: list[int], seed: int) -> None:
        """Ask for batch ``number`` of this pass, its random draws seeded with ``seed``."""
        self._tasks.put(((generation, number), list(indices), seed))

    def result(self, generation: int, number: int, timeout: float) -> Any:
        """The batch ``number`` of this pass, waiting up to ``timeout`` seconds for it."""
        key = (generation, number)
        while key not in self._ready:
            readable = wait(self._results, timeout=timeout)
            if not readable:
                dead = [w.name for w in self._workers if not w.is_alive()]
                if dead:
                    raise WorkerError(f"DataLoader worker(s) {', '.join(dead)} died")
                raise TimeoutError(f"DataLoader: no batch within {timeout} s")
            for connection in readable:
                try:
                    got_key, *payload = connection.recv()  # type: ignore[union-attr]
                except EOFError:
                    raise WorkerError("a DataLoader worker exited unexpectedly") from None
                if got_key[0] != self._generation:
                    _discard_ready(tuple(payload))
                    continue
                self._ready[got_key] = tuple(payload)
        name, layout, specs = self._ready.pop(key)
        if name is None:
            raise WorkerError(f"a DataLoader worker failed:\n{layout}")
        return self._reader.read(name, layout, specs)

    def shutdown(self) -> None:
        """Stop the workers and free the shared memory of batches nobody took."""
        for _ in self._workers:
            self._tasks.put(None)
        for worker in self._workers:
            worker.join(timeout=1.0)
            if worker.is_alive():
                worker.terminate()
                worker.join(timeout=1.0)
        for connection in self._results:
            connection.close()
        self._ready.clear()
        self._tasks.close()
        self._reader.close()
        self._cleanup()  # unlink every slot of this pool

    @property
    def pids(self) -> list[int]:
        return [w.pid for w in self._workers if w.pid is not None]


def _discard_ready(payload: tuple[Any, ...]) -> None:
    """A result nobody will take: its slot is simply reused."""
__all__ = ["ProcessPool", "WorkerError", "processes_available"]
