"""``ImageRecordIter`` (``mxnet.io.ImageRecordIter``): batches of images from a RecordIO file
for Module users, decoded and augmented in worker processes.

It follows MXNet 1.9.1's default augmenter for the parameters it accepts: ``resize``
(shorter edge, bilinear), a ``data_shape`` crop (random with ``rand_crop``, else central;
an image smaller than the crop is first enlarged keeping its aspect ratio), a mirror
(``rand_mirror``: half the images; ``mirror``: all), then per channel
``(pixel - mean) * (scale / std)`` in float32, channels RGB, layout NCHW. Parameters of
MXNet's that it does not implement are refused by name rather than ignored.

The work per batch is vectorised where it can be: each worker decodes its images
(libjpeg-turbo for JPEG), then crops and mirrors the whole batch with a few numpy
operations and sends it as uint8; the iterator normalises it with one more.

>>> import os, tempfile
>>> import numpy as np
>>> from engine import recordio
>>> from engine.io import ImageRecordIter
>>> rec = os.path.join(tempfile.mkdtemp(), "a.rec")
>>> w = recordio.MXIndexedRecordIO(rec[:-4] + ".idx", rec, "w")
>>> for i in range(5):
...     w.write_idx(i, recordio.pack_img((0, float(i), i, 0), np.full((8, 8, 3), i, np.uint8)))
>>> w.close()
>>> it = ImageRecordIter(path_imgrec=rec, data_shape=(3, 6, 6),
...                      batch_size=2, preprocess_threads=0)
>>> [(b.data[0].shape, b.label[0].asnumpy().tolist(), b.pad) for b in it][-1]
((2, 3, 6, 6), [4.0, 0.0], 1)
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy
from numpy.lib.stride_tricks import sliding_window_view

from .. import random as _random
from ..context import cpu
from ..io import DataBatch, DataDesc, DataIter
from ..ndarray.ndarray import NDArray
from .codec import decode, decode_rgb_batch
from .resize import resize as _resize

# MXNet's IRHeader as stored at the start of a record (recordio's "<IfQQ")
_HEADER = numpy.dtype([("flag", "<u4"), ("label", "<f4"), ("id", "<u8"), ("id2", "<u8")])
_CPU = cpu()  # one context object for all the arrays made here (not one per image)

# MXNet parameters accepted with only their default value (anything else is refused)
_UNSUPPORTED_DEFAULTS: dict[str, Any] = {
    "max_rotate_angle": 0, "max_aspect_ratio": 0.0, "min_aspect_ratio": None,
    "max_shear_ratio": 0.0, "max_crop_size": -1, "min_crop_size": -1,
    "max_random_scale": 1.0, "min_random_scale": 1.0, "max_random_area": 1.0,
    "min_random_area": 1.0, "max_img_size": 1e10, "min_img_size": 0.0,
    "random_resized_crop": False, "brightness": 0.0, "contrast": 0.0, "saturation": 0.0,
    "pca_noise": 0.0, "random_h": 0, "random_s": 0, "random_l": 0, "rotate": -1,
    "fill_value": 255, "pad": 0, "max_random_contrast": 0.0,
    "max_random_illumination": 0.0, "mean_img": "", "path_imglist": "",
    "shuffle_chunk_size": 0, "seed_aug": None,
}
# accepted and without effect here (logging, memory, or MXNet-internal tuning)
_IGNORED = {"verbose", "num_decode_threads", "ctx", "shuffle_chunk_seed", "dtype_out",
            "part_index_sort", "device_id"}


class _BatchBuilder:
    """``batchify_fn``: raw records → (NCHW uint8 crops, labels); :meth:`normalise` makes
    the float32 data of them."""

    def __init__(self, data_shape: tuple[int, int, int], label_width: int, resize: int,
                 rand_crop: bool, rand_mirror: bool, mirror: bool, mean: numpy.ndarray,
                 mult: numpy.ndarray, inter_method: int) -> None:
        self.data_shape = data_shape
        self.label_width = label_width
        self.resize = resize
        self.rand_crop = rand_crop
        self.rand_mirror = rand_mirror
        self.mirror = mirror
        self.mean = mean
        self.mult = mult
        self.inter_method = inter_method

    def __call__(self, records: list[bytes]) -> tuple[numpy.ndarray, numpy.ndarray]:
        count = len(records)
        rng = _random.generator()
        flips = rng.random(count) < 0.5 if self.rand_mirror else numpy.full(count, self.mirror)
        where = rng.random((count, 2))  # crop positions, as fractions of the free room
        labels, payloads = self._split(records)
        if self.data_shape[0] == 3:
            images = decode_rgb_batch(payloads)
        else:
            images = [decode(payload, 0) for payload in payloads]
        pixels = self._crop_and_flip(images, where, flips)
        return pixels, labels[:, 0] if self.label_width == 1 else labels

    def normalise(self, pixels: numpy.ndarray) -> numpy.ndarray:
        """(pixel - mean) * (scale / std) in float32, as MXNet computes it, for a batch."""
        data = numpy.subtract(pixels, self.mean[:, None, None], dtype=numpy.float32)
        data *= self.mult[:, None, None]
        return data

    def _crop_and_flip(self, images: list[numpy.ndarray], where: numpy.ndarray,
                       flips: numpy.ndarray) -> numpy.ndarray:
        """The batch's crops as NCHW uint8. Images of one size that need no resizing (the
        usual record file) are cropped and mirrored by a few whole-batch numpy operations
        instead of a Python step per image."""
        channels, height, width = self.data_shape
        count = len(images)
        shapes = {img.shape for img in images}
        rows, cols, depth = next(iter(shapes))
        if (len(shapes) > 1 or self.resize > 0 or rows < height or cols < width
                or depth != channels):
            images = [self._fit(img) for img in images]
            fitted = [self._crop_one(img, where[i]) for i, img in enumerate(images)]
            planes = numpy.stack(fitted).transpose(0, 3, 1, 2)
        else:
            if self.rand_crop:
                ys = (where[:, 0] * (rows - height + 1)).astype(numpy.intp)
                xs = (where[:, 1] * (cols - width + 1)).astype(numpy.intp)
            else:
                ys = numpy.full(count, (rows - height) // 2)
                xs = numpy.full(count, (cols - width) // 2)
            batch = numpy.stack(images).transpose(0, 3, 1, 2)
            # every crop position of every image as a view, then one gather: (N, C, H, W)
            windows = sliding_window_view(batch, (height, width), axis=(2, 3))
            planes = windows[numpy.arange(count), :, ys, xs]
        planes = numpy.ascontiguousarray(planes)
        if flips.any():
            planes[flips] = planes[flips][..., ::-1]
        return planes

    def _crop_one(self, img: numpy.ndarray, where: numpy.ndarray) -> numpy.ndarray:
        _, height, width = self.data_shape
        y = img.shape[0] - height
        x = img.shape[1] - width
        if self.rand_crop:
            y, x = int(where[0] * (y + 1)), int(where[1] * (x + 1))
        else:
            y, x = y // 2, x // 2
        return img[y:y + height, x:x + width]

    def _split(self, records: list[bytes]) -> tuple[numpy.ndarray, list[bytes]]:
        """(labels as (N, label_width) float32, image payloads). Records with one label in
        their header (the usual case) have all their headers read by one numpy call."""
        from ..recordio import unpack

        count = len(records)
        if self.label_width == 1:
            heads = b"".join([record[:_HEADER.itemsize] for record in records])
            if len(heads) == count * _HEADER.itemsize:  # else one is too short: unpack says so
                fields = numpy.frombuffer(heads, _HEADER)
                if not fields["flag"].any():
                    payloads = [record[_HEADER.itemsize:] for record in records]
                    return fields["label"].reshape(count, 1), payloads
        labels = numpy.empty((count, self.label_width), numpy.float32)
        payloads = []
        for i, record in enumerate(records):
            header, payload = unpack(record)
            labels[i] = self._label(header)
            payloads.append(payload)
        return labels, payloads

    def _label(self, header: Any) -> Any:
        if header.flag > 0:
            if header.flag != self.label_width:
                raise ValueError(f"rec file provide {header.flag}-dimensional label but "
                                 f"label_width is set to {self.label_width}")
            return header.label
        if self.label_width != 1:
            raise ValueError("label_width must be 1 unless the rec file is packed with multi "
                             "dimensional label")
        return header.label

    def _fit(self, img: numpy.ndarray) -> numpy.ndarray:
        """MXNet's resize of the shorter edge, then enlarging an image smaller than the crop."""
        _, height, width = self.data_shape
        if self.resize > 0:
            rows, cols = img.shape[:2]
            if rows > cols:
                img = _resize(img, self.resize, self.resize * rows // cols, self.inter_method)
            else:
                img = _resize(img, self.resize * cols // rows, self.resize, self.inter_method)
        rows, cols = img.shape[:2]
        if rows < height:
            cols = int(numpy.float32(height) / numpy.float32(rows) * numpy.float32(cols))
            img = _resize(img, cols, height, self.inter_method)
            rows = height
        if cols < width:
            rows = int(numpy.float32(width) / numpy.float32(cols) * numpy.float32(rows))
            img = _resize(img, width, rows, self.inter_method)
        if img.ndim == 2:
            img = img[:, :, None]
        return img


class _EpochBatches:
    """A batch sampler whose batches are replaced at every reset."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)

    def set_epoch(self, epoch: int) -> None:
        pass


def _as_nd(array: Any) -> Any:
    return array if isinstance(array, NDArray) else NDArray(array, _CPU)


class ImageRecordIter(DataIter):
    """Iterate over ``path_imgrec`` (with ``path_imgidx``, default: the same name with
    ``.idx``) in batches of ``batch_size`` images shaped ``data_shape`` (C, H, W; C is 3 or
    1). ``preprocess_threads`` worker processes decode and augment (0: in this process),
    ``prefetch_buffer`` batches ahead. ``round_batch`` (default) fills the last batch from
    the start of the records, reports ``pad``, and (without shuffle) starts the next pass
    after the records it borrowed, as MXNet does. Without ``round_batch`` the last batch is
    filled the same way but the next pass starts from the beginning; its ``pad`` is the true
    count (MXNet reports 0 there, over stale data). ``num_parts``/``part_index`` read one
    contiguous part of the records, as in distributed training."""

    def __init__(self, path_imgrec: str, data_shape: Sequence[int], batch_size: int,
                 path_imgidx: str = "", label_width: int = 1, shuffle: bool = False,
                 seed: int = 0, rand_crop: bool = False, rand_mirror: bool = False,
                 mirror: bool = False, mean_r: float = 0.0, mean_g: float = 0.0,
                 mean_b: float = 0.0, mean_a: float = 0.0, std_r: float = 1.0,
                 std_g: float = 1.0, std_b: float = 1.0, std_a: float = 1.0,
                 scale: float = 1.0, resize: int = -1, inter_method: int = 1,
                 round_batch: bool = True, num_parts: int = 1, part_index: int = 0,
                 preprocess_threads: int = 4, prefetch_buffer: int = 4,
                 data_name: str = "data", label_name: str = "softmax_label",
                 dtype: str = "float32", **kwargs: Any) -> None:
        super().__init__(batch_size)
        from ..gluon.data import DataLoader, RecordFileDataset

        self._check_extra(kwargs)
        shape = tuple(int(d) for d in data_shape)
        if len(shape) != 3 or shape[0] not in (1, 3):
            raise ValueError(f"data_shape must be (channels, height, width) with 1 or 3 "
                             f"channels, got {tuple(data_shape)}")
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if dtype not in ("float32", "uint8"):
            raise ValueError(f"dtype {dtype!r} is not supported: float32 or uint8")
        if not 0 <= part_index < num_parts:
            raise ValueError(f"part_index {part_index} out of range for num_parts {num_parts}")
        if path_imgidx and os.path.splitext(path_imgidx)[0] != os.path.splitext(path_imgrec)[0]:
            raise ValueError("path_imgidx must name the .idx beside path_imgrec "
                             f"({os.path.splitext(path_imgrec)[0]}.idx)")
        self._records = RecordFileDataset(path_imgrec)
        total = len(self._records)
        first = total * part_index // num_parts
        self._indices = numpy.arange(first, total * (part_index + 1) // num_parts)
        if len(self._indices) < batch_size and round_batch:
            raise ValueError("number of input images must be bigger than the batch size")
        channels = shape[0]
        mean = numpy.array([mean_r, mean_g, mean_b][:channels], numpy.float32)
        std = numpy.array([std_r, std_g, std_b][:channels], numpy.float32)
        builder = _BatchBuilder(shape, label_width, resize, rand_crop, rand_mirror, mirror,
                                mean, numpy.float32(scale) / std, inter_method)
        # the workers send uint8 pixels and this process normalises them: a quarter of the
        # bytes through shared memory, and the float32 batch is written once, here
        self._normalise = None if dtype == "uint8" else builder.normalise
        self._sampler = _EpochBatches()
        workers = min(max(int(preprocess_threads), 0), os.cpu_count() or 1)
        self._loader = DataLoader(self._records, batch_sampler=self._sampler,
                                  batchify_fn=builder, num_workers=workers,
                                  prefetch=max(int(prefetch_buffer), 1))
        self._shuffle = shuffle
        self._rng = numpy.random.default_rng(seed) if seed else None
        self._round_batch = round_batch
        self._label_width = label_width
        self._carry = 0  # records of this pass already served by the last padded batch
        self.provide_data = [DataDesc(data_name, (batch_size, *shape), numpy.dtype(dtype))]
        label_shape = (batch_size,) if label_width == 1 else (batch_size, label_width)
        self.provide_label = [DataDesc(label_name, label_shape)]
        self._batches: Iterator[Any] | None = None
        self._current: tuple[Any, int] | None = None
        self.reset()

    @staticmethod
    def _check_extra(kwargs: dict[str, Any]) -> None:
        for name, value in kwargs.items():
            if name in _IGNORED:
                continue
            if name not in _UNSUPPORTED_DEFAULTS:
                raise TypeError(f"ImageRecordIter got an unexpected argument {name!r}")
            if value != _UNSUPPORTED_DEFAULTS[name]:
                raise ValueError(f"ImageRecordIter: {name}={value!r} is not supported by "
                                 f"Rudder's engine (only its default, "
                                 f"{_UNSUPPORTED_DEFAULTS[name]!r})")

    def _plan(self) -> list[tuple[list[int], int]]:
        """This pass's batches as (record indices, pad)."""
        order = self._indices
        if self._shuffle:
            rng = self._rng if self._rng is not None else _random.generator()
            order = rng.permutation(order)
        else:
            order = order[self._carry:]
        size = self.batch_size
        plan = [(order[i:i + size].tolist(), 0) for i in range(0, len(order), size)]
        self._carry = 0
        if plan and len(plan[-1][0]) < size:
            head = plan[-1][0]
            pad = size - len(head)
            plan[-1] = (head + self._indices[:pad].tolist(), pad)
            if self._round_batch and not self._shuffle:
                self._carry = pad  # MXNet goes on from where the padding stopped
        return plan

    def reset(self) -> None:
        """Start a new pass (a new order when shuffling)."""
        plan = self._plan()
        self._pads = [pad for _, pad in plan]
        self._sampler.batches = [indices for indices, _ in plan]
        self._batches = iter(self._loader)
        self._position = 0

    def iter_next(self) -> bool:
        assert self._batches is not None
        try:
            data, label = next(self._batches)
        except StopIteration:
            self._current = None
            return False
        if self._normalise is not None:
            data = self._normalise(data.asnumpy() if isinstance(data, NDArray) else data)
        self._current = ((_as_nd(data), _as_nd(label)), self._pads[self._position])
        self._position += 1
        return True

    def next(self) -> DataBatch:
        if not self.iter_next():
            raise StopIteration
        return DataBatch(data=self.getdata(), label=self.getlabel(), pad=self.getpad(),
                         provide_data=self.provide_data, provide_label=self.provide_label)

    def getdata(self) -> list[Any]:
        assert self._current is not None
        return [self._current[0][0]]

    def getlabel(self) -> list[Any]:
        assert self._current is not None
        return [self._current[0][1]]

    def getpad(self) -> int:
        return self._current[1] if self._current is not None else 0

    def close(self) -> None:
        """Stop the worker processes."""
        self._loader.close()


def ImageRecordUInt8Iter(**kwargs: Any) -> ImageRecordIter:  # noqa: N802 - MXNet's name
    """``ImageRecordIter`` giving the cropped/mirrored pixels as uint8 NCHW, unnormalised."""
    return ImageRecordIter(**{**kwargs, "dtype": "uint8"})


__all__ = ["ImageRecordIter", "ImageRecordUInt8Iter"]
