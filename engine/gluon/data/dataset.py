"""Datasets (``mxnet.gluon.data``): ``Dataset``, ``SimpleDataset``, ``ArrayDataset``.

>>> import numpy as np
>>> from engine.gluon.data import ArrayDataset
>>> ds = ArrayDataset(np.arange(6).reshape(3, 2), np.array([0, 1, 0]))
>>> len(ds), int(ds[1][1])
(3, 1)
>>> ds.transform_first(lambda x: x * 10)[1][0].tolist()
[20, 30]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy

from ...ndarray.ndarray import NDArray


class Dataset:
    """Abstract dataset: implement ``__getitem__`` and ``__len__``."""

    def __getitem__(self, idx: int) -> Any:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    def transform(self, fn: Callable[..., Any], lazy: bool = True) -> Dataset:
        """A dataset whose samples are ``fn(*sample)`` (``fn(sample)`` if not a tuple)."""
        trans = _LazyTransformDataset(self, fn)
        if lazy:
            return trans
        return SimpleDataset([trans[i] for i in range(len(trans))])

    def transform_first(self, fn: Callable[[Any], Any], lazy: bool = True) -> Dataset:
        """Apply ``fn`` to the first element of each sample (the data, not the label)."""
        return self.transform(_TransformFirst(fn), lazy)

    def filter(self, fn: Callable[[Any], bool]) -> Dataset:
        """The samples for which ``fn(sample)`` is true."""
        return _IndexedDataset(self, [i for i in range(len(self)) if fn(self[i])])

    def shard(self, num_shards: int, index: int) -> Dataset:
        """The ``index``-th of ``num_shards`` contiguous parts (earlier parts get the extras)."""
        if not 0 <= index < num_shards:
            raise ValueError(f"Shard index {index} out of bound: [0, {num_shards})")
        length = len(self)
        each, extra = divmod(length, num_shards)
        start = index * each + min(index, extra)
        end = start + each + (1 if index < extra else 0)
        return _IndexedDataset(self, list(range(start, end)))

    def take(self, count: int | None) -> Dataset:
        """The first ``count`` samples (all for None)."""
        n = len(self) if count is None else min(count, len(self))
        return _IndexedDataset(self, list(range(n)))

    def sample(self, sampler: Any) -> Dataset:
        """The samples in the order ``sampler`` yields indices."""
        return _IndexedDataset(self, list(sampler))


class _TransformFirst:
    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self._fn = fn

    def __call__(self, x: Any, *args: Any) -> Any:
        if args:
            return (self._fn(x), *args)
        return self._fn(x)


class _LazyTransformDataset(Dataset):
    def __init__(self, data: Dataset, fn: Callable[..., Any]) -> None:
        self._items = data
        self._fn = fn

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, idx: int) -> Any:
        item = self._items[idx]
        if isinstance(item, tuple):
            return self._fn(*item)
        return self._fn(item)


class _IndexedDataset(Dataset):
    def __init__(self, data: Dataset, indices: list[int]) -> None:
        self._items = data
        self._indices = indices

    def __len__(self) -> int:
        return len(self._indices)

    def __getitem__(self, idx: int) -> Any:
        return self._items[self._indices[idx]]


class SimpleDataset(Dataset):
    """A dataset over any sequence (a list, a numpy array...)."""

    def __init__(self, data: Any) -> None:
        self._items = data

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, idx: int) -> Any:
        return self._items[idx]


class ArrayDataset(Dataset):
    """Zips arrays of equal length: sample ``i`` is ``(a[i], b[i], ...)`` (or ``a[i]`` for one
    array). numpy arrays and NDArrays are indexed in bulk by the DataLoader."""

    def __init__(self, *args: Any) -> None:
        if not args:
            raise ValueError("ArrayDataset needs at least one array")
        self._length = len(args[0])
        self._items = []
        # bulk indexing reads the arrays as given (NDArrays stay on their context)
        self._bulk = list(args)
        for i, data in enumerate(args):
            if len(data) != self._length:
                raise ValueError(
                    f"All arrays must have the same length; array[0] has length {self._length} "
                    f"while array[{i}] has {len(data)}."
                )
            if isinstance(data, NDArray) and data.ndim == 1:
                data = data.asnumpy()  # per-sample access gives scalars, as MXNet does
            self._items.append(data)

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, idx: int) -> Any:
        if len(self._items) == 1:
            return self._items[0][idx]
        return tuple(data[idx] for data in self._items)

    def _bulk_arrays(self) -> list[Any] | None:
        """The underlying arrays when all can be fancy-indexed at once, else None."""
        if all(isinstance(d, (numpy.ndarray, NDArray)) for d in self._bulk):
            return self._bulk
        return None
