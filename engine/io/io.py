"""Data iterators for the Module API (``mxnet.io.io``): ``DataDesc``, ``DataBatch``,
``DataIter``, ``NDArrayIter``, and the wrappers ``ResizeIter`` and ``PrefetchingIter``.

>>> import numpy as np
>>> from engine.io import NDArrayIter
>>> it = NDArrayIter(np.arange(10).reshape(5, 2), np.arange(5), batch_size=2)
>>> [b.pad for b in it]
[0, 0, 1]
>>> it.provide_data[0].name, it.provide_data[0].shape
('data', (2, 2))
"""

from __future__ import annotations

from collections import namedtuple
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy

from .. import random as _random
from ..ndarray.ndarray import NDArray
from .utils import init_data


class DataDesc(namedtuple("DataDesc", ["name", "shape"])):
    """Name and shape of one input, plus ``dtype`` and ``layout`` attributes."""

    dtype: Any
    layout: str

    def __new__(cls, name: str, shape: Any, dtype: Any = numpy.float32,
                layout: str = "NCHW") -> DataDesc:
        ret = super().__new__(cls, name, tuple(shape))
        ret.dtype = dtype
        ret.layout = layout
        return ret

    def __repr__(self) -> str:
        return f"DataDesc[{self.name},{self.shape},{self.dtype},{self.layout}]"

    @staticmethod
    def get_batch_axis(layout: str | None) -> int:
        return 0 if layout is None else layout.find("N")

    @staticmethod
    def get_list(shapes: list[tuple[str, Any]], types: list[tuple[str, Any]] | None) -> list[Any]:
        if types is not None:
            type_dict = dict(types)
            return [DataDesc(x[0], x[1], type_dict[x[0]]) for x in shapes]
        return [DataDesc(x[0], x[1]) for x in shapes]


class DataBatch:
    """One batch: lists of data and label arrays, ``pad`` (padded samples at the end)."""

    def __init__(self, data: list[NDArray], label: list[NDArray] | None = None,
                 pad: int | None = None, index: Any = None, bucket_key: Any = None,
                 provide_data: Any = None, provide_label: Any = None) -> None:
        if data is not None and not isinstance(data, (list, tuple)):
            raise TypeError("Data must be list of NDArrays")
        if label is not None and not isinstance(label, (list, tuple)):
            raise TypeError("Label must be list of NDArrays")
        self.data = data
        self.label = label
        self.pad = pad
        self.index = index
        self.bucket_key = bucket_key
        self.provide_data = provide_data
        self.provide_label = provide_label

    def __str__(self) -> str:
        data = [d.shape for d in self.data]
        label = [lb.shape for lb in self.label] if self.label else None
        return f"{type(self).__name__}: data shapes: {data} label shapes: {label}"


class DataIter:
    """Base iterator: ``reset()``, ``next()`` → DataBatch, ``iter_next``, ``getdata``..."""

    def __init__(self, batch_size: int = 0) -> None:
        self.batch_size = batch_size

    def __iter__(self) -> DataIter:
        return self

    def reset(self) -> None:
        pass

    def next(self) -> DataBatch:
        if self.iter_next():
            return DataBatch(data=self.getdata(), label=self.getlabel(), pad=self.getpad(),
                             index=self.getindex())
        raise StopIteration

    def __next__(self) -> DataBatch:
        return self.next()

    def iter_next(self) -> bool:
        raise NotImplementedError

    def getdata(self) -> list[NDArray]:
        raise NotImplementedError

    def getlabel(self) -> list[NDArray] | None:
        return None

    def getindex(self) -> Any:
        return None

    def getpad(self) -> int:
        return 0


class NDArrayIter(DataIter):
    """Iterate over in-memory arrays in batches.

    ``last_batch_handle``: 'pad' wraps around to fill the last batch (``pad`` says how many
    samples are repeats), 'discard' drops the incomplete batch, 'roll_over' carries it to
    the start of the next epoch. ``shuffle`` draws a new order at construction and on each
    ``reset`` from :func:`engine.random.generator`.
    """

    def __init__(self, data: Any, label: Any = None, batch_size: int = 1, shuffle: bool = False,
                 last_batch_handle: str = "pad", data_name: str = "data",
                 label_name: str = "softmax_label") -> None:
        super().__init__(batch_size)
        if last_batch_handle not in ("pad", "discard", "roll_over"):
            raise ValueError(
                f"last_batch_handle must be 'pad', 'discard' or 'roll_over', got "
                f"{last_batch_handle!r}"
            )
        if int(batch_size) <= 0:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
        self.data = init_data(data, False, data_name)
        self.label = init_data(label, True, label_name)
        lengths = {v.shape[0] for _, v in self.data + self.label}
        if len(lengths) != 1:
            raise ValueError(f"All data and labels must have the same first dimension, got "
                             f"{[(k, v.shape) for k, v in self.data + self.label]}")
        self.num_data = lengths.pop()
        self.shuffle = shuffle
        self.last_batch_handle = last_batch_handle
        self.idx = numpy.arange(self.num_data)
        if shuffle:
            self.idx = _random.generator(numpy).permutation(self.num_data)
        if last_batch_handle == "discard":  # a batch larger than the data: no batches
            self.num_data -= self.num_data % batch_size
            self.idx = self.idx[: self.num_data]
        self.cursor = -self.batch_size
        self._cache: tuple[list[NDArray], list[NDArray]] | None = None

    @property
    def provide_data(self) -> list[DataDesc]:
        return [DataDesc(k, (self.batch_size, *v.shape[1:]), v.dtype) for k, v in self.data]

    @property
    def provide_label(self) -> list[DataDesc]:
        return [DataDesc(k, (self.batch_size, *v.shape[1:]), v.dtype) for k, v in self.label]

    def hard_reset(self) -> None:
        """Rewind ignoring any rolled-over samples."""
        self._cache = None
        self.cursor = -self.batch_size

    def reset(self) -> None:
        if self.shuffle:
            self.idx = _random.generator(numpy).permutation(len(self.idx))
        if self.last_batch_handle == "roll_over" and \
                self.num_data - self.batch_size < self.cursor < self.num_data:
            # the cached tail becomes the head of the first batch of the next epoch
            self.cursor = self.cursor - self.num_data - self.batch_size
        else:
            self.cursor = -self.batch_size
            self._cache = None

    def iter_next(self) -> bool:
        self.cursor += self.batch_size
        return self.cursor < self.num_data

    def next(self) -> DataBatch:
        if not self.iter_next():
            raise StopIteration
        data, label = self.getdata(), self.getlabel()
        if data[0].shape[0] != self.batch_size:  # an incomplete roll_over batch
            self._cache = (data, label)
            raise StopIteration
        return DataBatch(data=data, label=label, pad=self.getpad(), index=None)

    def _take(self, source: list[tuple[str, NDArray]], rows: numpy.ndarray) -> list[NDArray]:
        out = []
        for _, arr in source:
            out.append(NDArray(arr.raw[arr.xp.asarray(rows)], arr.context))
        return out

    def _batchify(self, source: list[tuple[str, NDArray]], which: int) -> list[NDArray]:
        if self.cursor >= self.num_data:
            raise RuntimeError("DataIter needs reset.")
        bs, n, cur = self.batch_size, self.num_data, self.cursor
        if self.last_batch_handle == "roll_over" and -bs < cur < 0:
            if self._cache is None:
                raise RuntimeError("next epoch should have cached data")
            head = self._take(source, self.idx[: cur + bs])
            cached = self._cache[which]
            return [_concat(a, b) for a, b in zip(cached, head, strict=True)]
        if self.last_batch_handle == "pad" and cur + bs > n:
            # wrap around to the start, as often as a batch larger than the data needs
            rows = numpy.concatenate([self.idx[cur:], numpy.resize(self.idx, cur + bs - n)])
            return self._take(source, rows)
        return self._take(source, self.idx[cur : min(cur + bs, n)])

    def getdata(self) -> list[NDArray]:
        return self._batchify(self.data, 0)

    def getlabel(self) -> list[NDArray]:
        return self._batchify(self.label, 1)

    def getpad(self) -> int:
        if self.last_batch_handle == "pad" and self.cursor + self.batch_size > self.num_data:
            return self.cursor + self.batch_size - self.num_data
        if self.last_batch_handle == "roll_over" and -self.batch_size < self.cursor < 0:
            return -self.cursor
        return 0


def _concat(a: NDArray, b: NDArray) -> NDArray:
    return NDArray(a.xp.concatenate([a.raw, b.raw], axis=0), a.context)


class ResizeIter(DataIter):
    """``data_iter`` cut or stretched to ``size`` batches per epoch: when it runs out
    first, it is reset and continues. ``reset_internal=False`` lets the next epoch carry on
    where this one stopped instead of resetting it."""

    def __init__(self, data_iter: DataIter, size: int, reset_internal: bool = True) -> None:
        super().__init__(data_iter.batch_size)
        self.data_iter = data_iter
        self.size = size
        self.reset_internal = reset_internal
        self.cur = 0
        self.current_batch: DataBatch | None = None
        self.provide_data = data_iter.provide_data  # type: ignore[attr-defined]
        self.provide_label = data_iter.provide_label  # type: ignore[attr-defined]
        if hasattr(data_iter, "default_bucket_key"):
            self.default_bucket_key = data_iter.default_bucket_key

    def reset(self) -> None:
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def iter_next(self) -> bool:
        if self.cur == self.size:
            return False
        try:
            self.current_batch = self.data_iter.next()
        except StopIteration:
            self.data_iter.reset()
            self.current_batch = self.data_iter.next()
        self.cur += 1
        return True

    def _batch(self) -> DataBatch:
        if self.current_batch is None:
            raise RuntimeError("ResizeIter: call iter_next() first")
        return self.current_batch

    def getdata(self) -> list[NDArray]:
        return self._batch().data

    def getlabel(self) -> list[NDArray] | None:
        return self._batch().label

    def getindex(self) -> Any:
        return self._batch().index

    def getpad(self) -> int:
        return self._batch().pad or 0


class PrefetchingIter(DataIter):
    """Several iterators read together, each one batch ahead on its own thread: a batch's
    ``data`` (``label``) is every iterator's data (labels) in order. ``rename_data`` /
    ``rename_label`` (one ``{old: new}`` dict per iterator) rename the descriptions."""

    def __init__(self, iters: Any, rename_data: list[dict[str, str]] | None = None,
                 rename_label: list[dict[str, str]] | None = None) -> None:
        iters = iters if isinstance(iters, list) else [iters]
        super().__init__(iters[0].batch_size)
        self.iters = iters
        self.rename_data = rename_data
        self.rename_label = rename_label
        self._pool = ThreadPoolExecutor(max_workers=len(iters))
        self._pending: list[Future[DataBatch | None]] = []
        self.current_batch: DataBatch | None = None
        self._prefetch()

    def _prefetch(self) -> None:
        self._pending = [self._pool.submit(_next_or_none, it) for it in self.iters]

    @staticmethod
    def _renamed(descs: list[DataDesc], names: dict[str, str] | None) -> list[DataDesc]:
        if names is None:
            return descs
        return [DataDesc(names.get(d.name, d.name), d.shape, d.dtype, d.layout) for d in descs]

    @property
    def provide_data(self) -> list[DataDesc]:
        names = self.rename_data or [None] * len(self.iters)
        return [d for it, n in zip(self.iters, names, strict=True)
                for d in self._renamed(it.provide_data, n)]

    @property
    def provide_label(self) -> list[DataDesc]:
        names = self.rename_label or [None] * len(self.iters)
        return [d for it, n in zip(self.iters, names, strict=True)
                for d in self._renamed(it.provide_label, n)]

    def reset(self) -> None:
        for future in self._pending:
            future.result()  # let every read in flight finish before rewinding
        for it in self.iters:
            it.reset()
        self._prefetch()

    def iter_next(self) -> bool:
        batches = [future.result() for future in self._pending]
        if any(b is None for b in batches):
            if not all(b is None for b in batches):
                raise ValueError("PrefetchingIter: the iterators have different lengths")
            return False
        done = [b for b in batches if b is not None]
        if len({b.pad for b in done}) > 1:
            raise ValueError("PrefetchingIter: the iterators' batches differ in padding")
        self.current_batch = DataBatch(
            [d for b in done for d in b.data], [lb for b in done for lb in (b.label or [])],
            done[0].pad, done[0].index, provide_data=self.provide_data,
            provide_label=self.provide_label)
        self._prefetch()
        return True

    def next(self) -> DataBatch:
        if self.iter_next():
            return self.current_batch  # type: ignore[return-value]
        raise StopIteration

    def getdata(self) -> list[NDArray]:
        return self.current_batch.data if self.current_batch else []

    def getlabel(self) -> list[NDArray] | None:
        return self.current_batch.label if self.current_batch else None

    def getindex(self) -> Any:
        return self.current_batch.index if self.current_batch else None

    def getpad(self) -> int:
        return (self.current_batch.pad or 0) if self.current_batch else 0


def _next_or_none(it: DataIter) -> DataBatch | None:
    try:
        return it.next()
    except StopIteration:
        return None


__all__ = ["DataBatch", "DataDesc", "DataIter", "NDArrayIter", "PrefetchingIter", "ResizeIter"]
