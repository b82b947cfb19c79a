"""``mx.image.ImageIter``: batches of images from a RecordIO file, an image list file or a
Python list, decoded and augmented in Python (``ImageRecordIter`` is the fast, multi-process
reader of .rec files; this is MXNet's flexible one).

>>> import numpy as np, os, tempfile
>>> from engine import image
>>> root = tempfile.mkdtemp()
>>> for i in range(3):
...     with open(os.path.join(root, f"{i}.png"), "wb") as f:
...         _ = f.write(image.imencode(np.full((4, 4, 3), 50 * i, np.uint8), ".png"))
>>> it = ImageIter(2, (3, 4, 4), imglist=[[i, f"{i}.png"] for i in range(3)], path_root=root)
>>> [(b.data[0].shape, b.label[0].asnumpy().tolist(), b.pad) for b in it]
[((2, 3, 4, 4), [0.0, 1.0], 0), ((2, 3, 4, 4), [2.0, 0.0], 1)]
"""

from __future__ import annotations

import os
from typing import Any

import numpy

from .. import random as _random
from .. import recordio
from ..base import numeric_types
from ..context import cpu
from ..io import DataBatch, DataDesc, DataIter
from ..ndarray.ndarray import NDArray
from . import imdecode
from .augmenters import Augmenter, CreateAugmenter

_LABEL_DTYPES = ("int32", "float32", "int64", "float64")


def _read_list_file(path: str, dtype: str) -> dict[Any, tuple[numpy.ndarray, str]]:
    """An .lst file: ``index<TAB>label(s)<TAB>path`` per line."""
    entries: dict[Any, tuple[numpy.ndarray, str]] = {}
    with open(path) as f:
        for line in f:
            fields = line.strip().split("\t")
            if len(fields) < 3:
                continue
            entries[int(fields[0])] = (numpy.asarray(fields[1:-1], dtype=dtype), fields[-1])
    return entries


def _read_list(imglist: list[Any], dtype: str) -> dict[Any, tuple[numpy.ndarray, str]]:
    """``[label(s)..., path]`` items keyed "1", "2", ... as MXNet keys them."""
    entries: dict[Any, tuple[numpy.ndarray, str]] = {}
    for number, item in enumerate(imglist, start=1):
        if len(item) > 2:
            label = numpy.asarray(item[:-1], dtype=dtype)
        elif isinstance(item[0], numeric_types):
            label = numpy.asarray([item[0]], dtype=dtype)
        else:
            label = numpy.asarray(item[0], dtype=dtype)
        entries[str(number)] = (label, item[-1])
    return entries


class ImageIter(DataIter):
    """Image batches (``(batch, 3, H, W)`` float32) and labels from ``path_imgrec`` (with
    ``path_imgidx`` for random access), ``path_imglist`` or ``imglist`` (images read from
    ``path_root``).

    ``aug_list`` transforms each HWC image (default: ``CreateAugmenter(data_shape,
    **kwargs)``). ``last_batch_handle``: 'pad' fills the last batch from the start of the
    data (``pad`` counts those), 'discard' drops it, 'roll_over' carries its images into the
    first batch of the next epoch. ``shuffle`` reorders the images on every ``reset``;
    ``num_parts``/``part_index`` read one contiguous part of them.
    """

    def __init__(self, batch_size: int, data_shape: tuple[int, int, int], label_width: int = 1,
                 path_imgrec: str | None = None, path_imglist: str | None = None,
                 path_root: str | None = None, path_imgidx: str | None = None,
                 shuffle: bool = False, part_index: int = 0, num_parts: int = 1,
                 aug_list: list[Augmenter] | None = None, imglist: list[Any] | None = None,
                 data_name: str = "data", label_name: str = "softmax_label",
                 dtype: str = "float32", last_batch_handle: str = "pad", **kwargs: Any) -> None:
        super().__init__(batch_size)
        if not (path_imgrec or path_imglist or isinstance(imglist, list)):
            raise ValueError("ImageIter needs path_imgrec, path_imglist or imglist")
        if dtype not in _LABEL_DTYPES:
            raise ValueError(f"ImageIter: label dtype {dtype!r} not supported")
        if len(data_shape) != 3:
            raise ValueError("data_shape should have length 3, with dimensions CxHxW")
        if data_shape[0] != 3:
            raise ValueError("This iterator expects inputs to have 3 channels.")
        if last_batch_handle not in ("pad", "discard", "roll_over"):
            raise ValueError(f"last_batch_handle {last_batch_handle!r}: 'pad', 'discard' or "
                             "'roll_over'")
        self.imgrec: recordio.MXRecordIO | None = None
        keys: list[Any] | None = None
        if path_imgrec:
            if path_imgidx:
                self.imgrec = recordio.MXIndexedRecordIO(path_imgidx, path_imgrec, "r")
                keys = list(self.imgrec.keys)  # type: ignore[attr-defined]
            else:
                self.imgrec = recordio.MXRecordIO(path_imgrec, "r")
        self.imglist: dict[Any, tuple[numpy.ndarray, str]] | None = None
        if path_imglist:
            self.imglist = _read_list_file(path_imglist, dtype)
        elif isinstance(imglist, list):
            self.imglist = _read_list(imglist, dtype)
        if self.imgrec is None:
            keys = list(self.imglist or {})
        elif (shuffle or num_parts > 1) and keys is None:
            raise ValueError("ImageIter: shuffle and num_parts need path_imgidx with a .rec")
        if keys is not None and num_parts > 1:
            per_part = len(keys) // num_parts
            keys = keys[part_index * per_part:(part_index + 1) * per_part]
        self.seq = keys
        self.path_root = path_root
        self.data_shape = tuple(data_shape)
        self.label_width = label_width
        self.shuffle = shuffle
        self.dtype = dtype
        label_shape = (batch_size, label_width) if label_width > 1 else (batch_size,)
        self.provide_data = [DataDesc(data_name, (batch_size, *self.data_shape))]
        self.provide_label = [DataDesc(label_name, label_shape)]
        self.auglist = CreateAugmenter(self.data_shape, **kwargs) if aug_list is None \
            else aug_list
        self.last_batch_handle = last_batch_handle
        self.cur = 0
        self._allow_read = True
        self._carry: tuple[numpy.ndarray, numpy.ndarray, int] | None = None  # roll_over
        self.reset()

    # ----------------------------------------------------------------- epochs
    def reset(self) -> None:
        if self.seq is not None and self.shuffle:
            order = _random.generator().permutation(len(self.seq))
            self.seq = [self.seq[i] for i in order]
        if self.last_batch_handle != "roll_over" or self._carry is None:
            self._rewind()

    def hard_reset(self) -> None:
        """Rewind, dropping images carried over by 'roll_over'."""
        self._carry = None
        self.reset()

    def _rewind(self) -> None:
        if self.imgrec is not None:
            self.imgrec.reset()
        self.cur = 0
        self._allow_read = True

    # ---------------------------------------------------------------- samples
    def next_sample(self) -> tuple[Any, bytes]:
        """The next (label, encoded image); StopIteration at the end of the data."""
        if not self._allow_read:
            raise StopIteration
        if self.seq is None:  # a .rec read in file order
            assert self.imgrec is not None
            record = self.imgrec.read()
            if record is None:
                if self.last_batch_handle != "discard":
                    self.imgrec.reset()
                raise StopIteration
            header, payload = recordio.unpack(record)
            return header.label, payload
        if self.cur >= len(self.seq):
            if self.last_batch_handle != "discard":
                self.cur = 0
            raise StopIteration
        key = self.seq[self.cur]
        self.cur += 1
        if self.imgrec is not None:
            header, payload = recordio.unpack(self.imgrec.read_idx(key))  # type: ignore
            label = header.label if self.imglist is None else self.imglist[key][0]
            return label, payload
        assert self.imglist is not None
        label, name = self.imglist[key]
        return label, self.read_image(name)

    def read_image(self, fname: str) -> bytes:
        """The encoded bytes of image ``fname`` under ``path_root``."""
        with open(os.path.join(self.path_root or "", fname), "rb") as f:
            return f.read()

    def imdecode(self, s: bytes) -> NDArray:
        """Decode one image; a broken one raises RuntimeError naming it."""
        try:
            return imdecode(s)
        except Exception as err:
            raise RuntimeError(f"Broken image at position {self.cur}: {err}") from err

    def check_valid_image(self, data: NDArray) -> None:
        if len(data[0].shape) == 0:
            raise RuntimeError("Data shape is wrong")

    def augmentation_transform(self, data: NDArray) -> NDArray:
        for aug in self.auglist:
            data = aug(data)
        return data

    def postprocess_data(self, datum: NDArray) -> numpy.ndarray:
        """HWC to CHW, as the batch holds it."""
        return numpy.asarray(datum.asnumpy()).transpose(2, 0, 1)

    def check_data_shape(self, data_shape: tuple[int, ...]) -> None:
        if len(data_shape) != 3 or data_shape[0] != 3:
            raise ValueError("data_shape should be (3, H, W)")

    # ---------------------------------------------------------------- batches
    def _fill(self, data: numpy.ndarray, label: numpy.ndarray, start: int) -> int:
        """Read images into rows ``start..`` of the batch; the number of rows filled."""
        i = start
        try:
            while i < self.batch_size:
                lab, payload = self.next_sample()
                image = self.imdecode(payload)
                try:
                    self.check_valid_image(image)
                except RuntimeError:
                    continue  # MXNet skips an image it cannot use
                data[i] = self.postprocess_data(self.augmentation_transform(image))
                label[i] = numpy.asarray(lab).reshape(label[i].shape)
                i += 1
        except StopIteration:
            if i == 0:
                raise
        return i

    def next(self) -> DataBatch:
        if self._carry is not None:
            data, label, filled = self._carry
        else:
            data = numpy.zeros((self.batch_size, *self.data_shape), numpy.float32)
            # float32 whatever ``dtype`` (which is the list's label type), as in MXNet
            label = numpy.zeros(self.provide_label[0].shape, numpy.float32)
            filled = self._fill(data, label, 0)
        pad = self.batch_size - filled
        if pad:
            if self.last_batch_handle == "discard":
                raise StopIteration
            if self.last_batch_handle == "roll_over" and self._carry is None:
                self._carry = (data, label, filled)
                raise StopIteration
            self._fill(data, label, filled)
            if self.last_batch_handle == "pad":
                self._allow_read = False
            else:
                self._carry = None
        return DataBatch([NDArray(data, cpu())], [NDArray(label, cpu())], pad=pad)


__all__ = ["ImageIter"]
