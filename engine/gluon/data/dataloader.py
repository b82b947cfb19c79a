"""``DataLoader``: batches of a Dataset as NDArrays.

For an :class:`ArrayDataset` of numpy arrays/NDArrays with the default batchify, each batch
is one fancy-index of each underlying array (no per-sample Python loop). With ``seed``, the
shuffle order of epoch ``e`` is a pure function of (seed, e); ``set_epoch(e)`` selects it,
so a job resumed mid-epoch replays the same batches.

>>> import numpy as np
>>> from engine.gluon.data import ArrayDataset, DataLoader
>>> ds = ArrayDataset(np.zeros((10, 3), "float32"), np.arange(10))
>>> loader = DataLoader(ds, batch_size=4, shuffle=True, seed=1)
>>> [(x.shape, y.shape) for x, y in loader][-1]
((2, 3), (2,))
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy

from ... import random as _random
from ...ndarray.ndarray import NDArray
from .dataset import ArrayDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler
from .worker_pool import ProcessPool, batch_seed, processes_available


def default_batchify_fn(data: list[Any]) -> Any:
    """Stack samples into a batch: NDArrays with ``nd.stack``, tuples element-wise, anything
    else through ``numpy.asarray`` (keeping its dtype)."""
    from ... import nd

    first = data[0]
    if isinstance(first, NDArray):
        return nd.stack(*data)
    if isinstance(first, tuple):
        return [default_batchify_fn(list(items)) for items in zip(*data, strict=True)]
    arr = numpy.asarray(data)
    return nd.array(arr, dtype=arr.dtype)


# MXNet's batchify for worker processes builds the batch in shared memory; Rudder's worker
# processes copy the finished batch into shared memory themselves (worker_pool), so the
# ordinary batchify is the right one
default_mp_batchify_fn = default_batchify_fn


def _take(array: Any, indices: numpy.ndarray) -> NDArray:
    from ... import nd

    if isinstance(array, NDArray):
        raw = array.raw[array.xp.asarray(indices)]
        return NDArray(raw, array.context)
    batch = array[indices]
    return nd.array(batch, dtype=batch.dtype)


class DataLoader:
    """Iterate over a dataset in mini-batches.

    ``last_batch``: 'keep' (default), 'discard' or 'rollover'. With ``num_workers > 0``
    batches are built by that many worker processes, as in MXNet (forked: they inherit the
    dataset; only index lists travel to them, and batches come back through shared memory,
    see :mod:`.worker_pool`), or threads with ``thread_pool=True``, up to ``prefetch``
    (default ``2 * num_workers``) batches ahead, in order; a batch that takes longer than
    ``timeout`` seconds raises. Threads are used anyway where processes cannot be (a daemon
    process such as a Celery prefork child, a platform without fork) and for an
    ArrayDataset of arrays, whose batches are one bulk copy. ``auto_reload=True`` starts the
    next epoch's iterator as soon as one finishes (``refresh()``/``clean()`` do it by hand).
    ``pin_memory`` has no effect (no pinned host memory on numpy).
    """

    def __init__(self, dataset: Any, batch_size: int | None = None, shuffle: bool = False,
                 sampler: Sampler | None = None, last_batch: str | None = None,
                 batch_sampler: Sampler | None = None,
                 batchify_fn: Callable[[list[Any]], Any] | None = None, num_workers: int = 0,
                 pin_memory: bool = False, pin_device_id: int = 0, prefetch: int | None = None,
                 thread_pool: bool = False, timeout: int = 120, auto_reload: bool = False,
                 seed: int | None = None) -> None:
        self._dataset = dataset
        self._num_workers = max(int(num_workers), 0)  # MXNet treats a negative count as 0
        self._prefetch = max(0, int(prefetch) if prefetch is not None else 2 * self._num_workers)
        self._timeout = timeout
        self._thread_pool = thread_pool
        self._pin_memory = pin_memory
        self._pool: ThreadPoolExecutor | None = None
        self._processes: ProcessPool | None = None
        self._seed = seed
        self._epoch = 0
        if batch_sampler is None:
            if batch_size is None:
                raise ValueError("batch_size must be specified unless batch_sampler is specified")
            if sampler is None:
                sampler = RandomSampler(len(dataset), seed) if shuffle else \
                    SequentialSampler(len(dataset))
            elif shuffle:
                raise ValueError("shuffle must not be specified if sampler is specified")
            batch_sampler = BatchSampler(sampler, batch_size, last_batch or "keep")
        elif batch_size is not None or shuffle or sampler is not None or last_batch is not None:
            raise ValueError(
                "batch_size, shuffle, sampler and last_batch must not be specified if "
                "batch_sampler is specified."
            )
        self._batch_sampler = batch_sampler
        self._batchify_fn = batchify_fn
        bulk = dataset._bulk_arrays() if isinstance(dataset, ArrayDataset) else None
        self._bulk = bulk if batchify_fn is None else None
        self._iter: Iterator[Any] | None = None
        self.auto_reload = auto_reload
        if auto_reload:
            self.refresh()

    def refresh(self) -> None:
        """Prepare the next pass's iterator now (``auto_reload`` does it after each pass)."""
        self._iter = self._batches()

    def clean(self) -> None:
        """Drop a prepared iterator; the next ``iter()`` starts a fresh pass."""
        self._iter = None

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration yield epoch ``epoch``'s order (with a seeded shuffle) and,
        in worker processes, its augmentations."""
        self._batch_sampler.set_epoch(epoch)
        self._epoch = int(epoch)

    def __iter__(self) -> Iterator[Any]:
        if self._iter is None and not self.auto_reload and self._num_workers == 0:
            for batch in self._batch_sampler:  # the plain path: nothing prepared, no workers
                yield self._make_batch(batch)
            return
        current = self._iter if self._iter is not None else self._batches()
        self._iter = None  # one prepared iterator serves one pass
        yield from current
        if self._iter is None and self.auto_reload:
            self.refresh()

    def _batches(self) -> Iterator[Any]:
        if self._num_workers == 0:
            for batch in self._batch_sampler:
                yield self._make_batch(batch)
            return
        if self._use_processes():
            yield from self._process_batches()
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._num_workers,
                                            thread_name_prefix="rudder-dataloader")
        # indices are drawn here, in order (a seeded shuffle stays reproducible); only the
        # batch building runs in the workers, at most `prefetch` batches ahead
        pending: deque[Future[Any]] = deque()
        for indices in self._batch_sampler:
            pending.append(self._pool.submit(self._make_batch, indices))
            if len(pending) > self._prefetch:
                yield pending.popleft().result(timeout=self._timeout)
        while pending:
            yield pending.popleft().result(timeout=self._timeout)

    def _use_processes(self) -> bool:
        return not self._thread_pool and self._bulk is None and processes_available()

    def _process_batches(self) -> Iterator[Any]:
        ahead = max(self._prefetch, 1)
        if self._processes is None:
            self._processes = ProcessPool(self._make_batch, self._num_workers, ahead)
        pool = self._processes
        generation = pool.new_pass()
        # as with threads: indices drawn here in order, at most `ahead` batches ahead
        submitted = taken = 0
        pass_seed = self._pass_seed()
        for indices in self._batch_sampler:
            pool.submit(generation, submitted, indices, batch_seed(pass_seed, submitted))
            submitted += 1
            if submitted - taken > ahead:
                yield pool.result(generation, taken, self._timeout)
                taken += 1
        while taken < submitted:
            yield pool.result(generation, taken, self._timeout)
            taken += 1

    def _pass_seed(self) -> int:
        """Seed of this pass's augmentations in worker processes: from (seed, epoch) for a
        seeded loader, else a draw from engine.random."""
        epoch, self._epoch = self._epoch, self._epoch + 1
        if self._seed is not None:
            return batch_seed(int(self._seed), epoch)
        return int(_random.generator().integers(0, 2**62))

    def close(self) -> None:
        """Stop the worker processes/threads now (they are also stopped when the loader is
        garbage-collected)."""
        pool, self._pool = getattr(self, "_pool", None), None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        processes, self._processes = getattr(self, "_processes", None), None
        if processes is not None:
            processes.shutdown()

    def __del__(self) -> None:
        self.close()

    def _make_batch(self, indices: list[int]) -> Any:
        if self._bulk is not None:
            idx = numpy.asarray(indices, dtype=numpy.int64)
            arrays = [_take(a, idx) for a in self._bulk]
            return arrays[0] if len(arrays) == 1 else arrays
        samples = [self._dataset[i] for i in indices]
        return (self._batchify_fn or default_batchify_fn)(samples)

    def __len__(self) -> int:
        return len(self._batch_sampler)
