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

from collections.abc import Callable, Iterator
from typing import Any

import numpy

from ...ndarray.ndarray import NDArray
from .dataset import ArrayDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler


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


def _take(array: Any, indices: numpy.ndarray) -> NDArray:
    from ... import nd

    if isinstance(array, NDArray):
        raw = array._data[array.xp.asarray(indices)]
        return NDArray(raw, array.context)
    batch = array[indices]
    return nd.array(batch, dtype=batch.dtype)


class DataLoader:
    """Iterate over a dataset in mini-batches.

    ``last_batch``: 'keep' (default), 'discard' or 'rollover'. ``num_workers``,
    ``pin_memory``, ``prefetch``, ``thread_pool`` and ``timeout`` are accepted for
    compatibility; loading runs in the calling thread.
    """

    def __init__(self, dataset: Any, batch_size: int | None = None, shuffle: bool = False,
                 sampler: Sampler | None = None, last_batch: str | None = None,
                 batch_sampler: Sampler | None = None,
                 batchify_fn: Callable[[list[Any]], Any] | None = None, num_workers: int = 0,
                 pin_memory: bool = False, pin_device_id: int = 0, prefetch: int | None = None,
                 thread_pool: bool = False, timeout: int = 120, seed: int | None = None) -> None:
        if num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {num_workers}")
        self._dataset = dataset
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

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration yield epoch ``epoch``'s order (with a seeded shuffle)."""
        self._batch_sampler.set_epoch(epoch)

    def __iter__(self) -> Iterator[Any]:
        for batch in self._batch_sampler:
            yield self._make_batch(batch)

    def _make_batch(self, indices: list[int]) -> Any:
        if self._bulk is not None:
            idx = numpy.asarray(indices, dtype=numpy.int64)
            arrays = [_take(a, idx) for a in self._bulk]
            return arrays[0] if len(arrays) == 1 else arrays
        samples = [self._dataset[i] for i in indices]
        return (self._batchify_fn or default_batchify_fn)(samples)

    def __len__(self) -> int:
        return len(self._batch_sampler)
