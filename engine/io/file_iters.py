"""Iterators over data files, as MXNet's C++ iterators read them: ``CSVIter`` (rows of
comma-separated numbers) and ``MNISTIter`` (the MNIST idx-ubyte files).

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp(), "d.csv")
>>> _ = path.write_text("1,2\\n3,4\\n5,6\\n")
>>> it = CSVIter(data_csv=str(path), data_shape=(2,), batch_size=2)
>>> [(b.data[0].asnumpy()[:, 0].tolist(), b.pad) for b in it]
[([1.0, 3.0], 0), ([5.0, 1.0], 1)]
"""

from __future__ import annotations

import gzip
import os
from typing import Any

import numpy

from ..base import MXNetError
from ..context import cpu
from ..ndarray.ndarray import NDArray
from .io import DataBatch, DataDesc, DataIter


def _read_csv(path: str, row_shape: tuple[int, ...], dtype: Any, what: str) -> numpy.ndarray:
    if not os.path.isfile(path):
        raise MXNetError(f"CSVIter: {what} file {path!r} does not exist")
    width = int(numpy.prod(row_shape))
    try:
        rows = numpy.loadtxt(path, delimiter=",", dtype=dtype, ndmin=2)
    except ValueError as err:
        raise MXNetError(f"CSVIter: {what} file {path!r} is not numbers: {err}") from None
    if rows.size and rows.shape[1] != width:
        raise MXNetError(f"CSVIter: {what} rows of {path!r} have {rows.shape[1]} values, "
                         f"{what}_shape {row_shape} needs {width}")
    return rows.reshape((len(rows), *row_shape))


class CSVIter(DataIter):
    """Batches of the rows of ``data_csv`` (each reshaped to ``data_shape``) and of
    ``label_csv`` (zeros when it is not given), as MXNet's ``CSVIter``.

    With ``round_batch`` (the default) the last batch of an epoch is completed with rows
    from the start, and the next epoch begins after the rows so used; ``pad`` counts them.
    Without it the last batch's missing rows keep what the previous batch had there.
    """

    def __init__(self, data_csv: str, data_shape: Any, label_csv: str | None = None,
                 label_shape: Any = (1,), batch_size: int = 1, round_batch: bool = True,
                 dtype: Any = "float32", data_name: str = "data",
                 label_name: str = "softmax_label", prefetch_buffer: int = 4,
                 ctx: str = "cpu") -> None:
        super().__init__(int(batch_size))
        if self.batch_size <= 0:
            raise MXNetError(f"CSVIter: batch_size must be positive, got {batch_size}")
        dtype = numpy.dtype(dtype)
        data_shape, label_shape = tuple(data_shape), tuple(label_shape)
        self._rows = _read_csv(data_csv, data_shape, dtype, "data")
        if label_csv is None or label_csv == "NULL":
            self._labels = numpy.zeros((len(self._rows), *label_shape), dtype)
        else:
            self._labels = _read_csv(label_csv, label_shape, dtype, "label")
            if len(self._labels) != len(self._rows):
                raise MXNetError(f"CSVIter: {len(self._rows)} data rows but "
                                 f"{len(self._labels)} label rows")
        if label_shape == (1,):  # one label per row: a (batch,) label array
            self._labels = self._labels.reshape(len(self._labels))
        self.round_batch = round_batch
        self._names = (data_name, label_name)
        self._start = 0  # the row this epoch begins at (after rows an earlier pad used)
        self._cursor = 0
        self._data_buffer = numpy.zeros((self.batch_size, *self._rows.shape[1:]), dtype)
        self._label_buffer = numpy.zeros((self.batch_size, *self._labels.shape[1:]), dtype)
        self._batch: tuple[numpy.ndarray, numpy.ndarray, int, numpy.ndarray] | None = None

    @property
    def provide_data(self) -> list[DataDesc]:
        return [DataDesc(self._names[0], self._data_buffer.shape, self._rows.dtype.type)]

    @property
    def provide_label(self) -> list[DataDesc]:
        return [DataDesc(self._names[1], self._label_buffer.shape, self._labels.dtype.type)]

    def reset(self) -> None:
        self._cursor = self._start

    def iter_next(self) -> bool:
        n, bs = len(self._rows), self.batch_size
        if self._cursor >= n:
            return False
        rows = numpy.arange(self._cursor, min(self._cursor + bs, n))
        pad = bs - len(rows)
        self._cursor += len(rows)
        if pad and self.round_batch:
            wrapped = numpy.resize(numpy.arange(n), pad)
            rows = numpy.concatenate([rows, wrapped])
            self._start = pad % n
        elif self._cursor >= n:
            self._start = 0
        # the buffers persist: without round_batch the unfilled rows keep the last batch's
        self._data_buffer[: len(rows)] = self._rows[rows]
        self._label_buffer[: len(rows)] = self._labels[rows]
        self._batch = (self._data_buffer.copy(), self._label_buffer.copy(), pad,
                       rows.astype(numpy.uint64))
        return True

    def next(self) -> DataBatch:
        if not self.iter_next():
            raise StopIteration
        return DataBatch([self.getdata()], [self.getlabel()], self.getpad(), self.getindex(),
                         provide_data=self.provide_data, provide_label=self.provide_label)

    def _current(self) -> tuple[numpy.ndarray, numpy.ndarray, int, numpy.ndarray]:
        if self._batch is None:
            raise MXNetError("CSVIter: call iter_next() or next() first")
        return self._batch

    def getdata(self) -> NDArray:  # type: ignore[override] # one array, as MXNet's C++ iters
        return NDArray(self._current()[0], cpu())

    def getlabel(self) -> NDArray:  # type: ignore[override]
        return NDArray(self._current()[1], cpu())

    def getpad(self) -> int:
        return self._current()[2]

    def getindex(self) -> numpy.ndarray:
        return self._current()[3]


def _read_idx(path: str, magic: int) -> numpy.ndarray:
    """An idx-ubyte file (MNIST's format; gzip-compressed ones too)."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except OSError as err:
        raise MXNetError(f"MNISTIter: cannot read {path!r}: {err}") from None
    header = numpy.frombuffer(raw[:4], ">u4")[0] if len(raw) >= 4 else 0
    if header != magic:
        raise MXNetError(f"MNISTIter: {path!r} is not an MNIST idx file")
    ndim = magic & 0xFF
    shape = tuple(int(d) for d in numpy.frombuffer(raw[4:4 + 4 * ndim], ">u4"))
    body = numpy.frombuffer(raw, numpy.uint8, offset=4 + 4 * ndim)
    if body.size != int(numpy.prod(shape)):
        raise MXNetError(f"MNISTIter: {path!r} is truncated")
    return body.reshape(shape)


class MNISTIter(DataIter):
    """MNIST images (scaled to [0, 1], ``(batch, 1, 28, 28)`` or flat ``(batch, 784)``) and
    labels from the idx-ubyte files, as MXNet's ``MNISTIter``; an incomplete last batch is
    dropped. ``shuffle`` draws the order from ``seed``; ``num_parts``/``part_index`` read
    one contiguous part of the data."""

    def __init__(self, image: str = "./train-images-idx3-ubyte",
                 label: str = "./train-labels-idx1-ubyte", batch_size: int = 128,
                 shuffle: bool = True, flat: bool = False, seed: int = 0, silent: bool = False,
                 num_parts: int = 1, part_index: int = 0, data_name: str = "data",
                 label_name: str = "softmax_label", prefetch_buffer: int = 4,
                 ctx: str = "cpu", dtype: Any = None, input_shape: Any = None) -> None:
        super().__init__(int(batch_size))
        images = _read_idx(image, 0x803)
        labels = _read_idx(label, 0x801)
        if len(images) != len(labels):
            raise MXNetError(f"MNISTIter: {len(images)} images but {len(labels)} labels")
        per_part = len(images) // num_parts
        part = slice(part_index * per_part, (part_index + 1) * per_part)
        images, labels = images[part], labels[part]
        if shuffle:
            order = numpy.random.Generator(numpy.random.PCG64(seed)).permutation(len(images))
            images, labels = images[order], labels[order]
        shape = (-1, images.shape[1] * images.shape[2]) if flat else (-1, 1, *images.shape[1:])
        self._images = (images.astype(numpy.float32) / 255.0).reshape(shape)
        self._labels = labels.astype(numpy.float32)
        self._names = (data_name, label_name)
        self._cursor = -self.batch_size

    @property
    def provide_data(self) -> list[DataDesc]:
        return [DataDesc(self._names[0], (self.batch_size, *self._images.shape[1:]))]

    @property
    def provide_label(self) -> list[DataDesc]:
        return [DataDesc(self._names[1], (self.batch_size,))]

    def reset(self) -> None:
        self._cursor = -self.batch_size

    def iter_next(self) -> bool:
        self._cursor += self.batch_size
        return self._cursor + self.batch_size <= len(self._images)

    def next(self) -> DataBatch:
        if not self.iter_next():
            raise StopIteration
        return DataBatch([self.getdata()], [self.getlabel()], 0, self.getindex(),
                         provide_data=self.provide_data, provide_label=self.provide_label)

    def getdata(self) -> NDArray:  # type: ignore[override]
        rows = slice(self._cursor, self._cursor + self.batch_size)
        return NDArray(self._images[rows].copy(), cpu())

    def getlabel(self) -> NDArray:  # type: ignore[override]
        rows = slice(self._cursor, self._cursor + self.batch_size)
        return NDArray(self._labels[rows].copy(), cpu())

    def getindex(self) -> numpy.ndarray:
        return numpy.arange(self._cursor, self._cursor + self.batch_size, dtype=numpy.uint64)
