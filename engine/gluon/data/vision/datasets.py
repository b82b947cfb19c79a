"""Vision datasets (``mxnet.gluon.data.vision.datasets``), read from local files only.

MNIST, FashionMNIST, CIFAR10 and CIFAR100 read the standard distribution files from
``root`` (Rudder never downloads: a missing file is an error that names it). Samples are
``(HWC uint8 NDArray, int32 label)``; ``transform(data, label)`` is applied when given.

>>> import os, tempfile
>>> import numpy as np
>>> from engine.gluon.data.vision import datasets
>>> root = tempfile.mkdtemp()
>>> try:
...     datasets.MNIST(root)
... except FileNotFoundError as err:
...     print(str(err).split(":")[0])
MNIST needs the standard files in the root folder
"""

from __future__ import annotations

import gzip
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy

from .... import image
from ....context import cpu
from ....ndarray.ndarray import NDArray
from ....recordio import unpack
from ...data.dataset import Dataset
from ..record_dataset import RecordFileDataset

_CPU = cpu()  # one context object for all the arrays made here (not one per image)

Transform = Callable[[Any, Any], Any]


def _missing(root: str, names: Sequence[str], dataset: str) -> FileNotFoundError:
    return FileNotFoundError(
        f"{dataset} needs the standard files in the root folder: {root} lacks "
        f"{', '.join(names)} (Rudder does not download data sets; copy them there)")


class _InMemoryImages(Dataset):
    """Images and labels held as numpy arrays; samples are (NDArray image, label)."""

    _images: numpy.ndarray
    _label: numpy.ndarray

    def __init__(self, root: str, transform: Transform | None) -> None:
        self._root = os.path.expanduser(root)
        self._transform = transform
        self._get_data()

    def _get_data(self) -> None:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self._label)

    def __getitem__(self, idx: int) -> Any:
        data, label = NDArray(self._images[idx], _CPU), self._label[idx]
        if self._transform is not None:
            return self._transform(data, label)
        return data, label


def _read_idx_file(path: str, magic: int, ndim: int) -> numpy.ndarray:
    """An IDX file (the MNIST format): big-endian magic, ``ndim`` sizes, uint8 values."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as fin:
        raw = fin.read()
    header = numpy.frombuffer(raw[:4 * (ndim + 1)], ">u4")
    if len(header) != ndim + 1 or header[0] != magic:
        raise ValueError(f"{path} is not an IDX file with magic {magic}")
    shape = tuple(int(n) for n in header[1:])
    body = numpy.frombuffer(raw, numpy.uint8, offset=4 * (ndim + 1))
    if body.size != int(numpy.prod(shape)):
        raise ValueError(f"{path}: header announces {shape} values, found {body.size}")
    return body.reshape(shape)


class MNIST(_InMemoryImages):
    """MNIST from ``root``: ``train-images-idx3-ubyte.gz``, ``train-labels-idx1-ubyte.gz``,
    ``t10k-images-idx3-ubyte.gz``, ``t10k-labels-idx1-ubyte.gz`` (or the same without
    ``.gz``). Samples: (28, 28, 1) uint8 images and int32 labels."""

    _name = "MNIST"

    def __init__(self, root: str = os.path.join("~", ".mxnet", "datasets", "mnist"),
                 train: bool = True, transform: Transform | None = None) -> None:
        self._train = train
        super().__init__(root, transform)

    def _find(self, names: list[str]) -> list[str]:
        paths, missing = [], []
        for name in names:
            candidates = [os.path.join(self._root, name),
                          os.path.join(self._root, name.removesuffix(".gz"))]
            found = next((c for c in candidates if os.path.isfile(c)), None)
            if found is None:
                missing.append(name)
            else:
                paths.append(found)
        if missing:
            raise _missing(self._root, missing, self._name)
        return paths

    def _get_data(self) -> None:
        prefix = "train" if self._train else "t10k"
        data_path, label_path = self._find([f"{prefix}-images-idx3-ubyte.gz",
                                            f"{prefix}-labels-idx1-ubyte.gz"])
        label = _read_idx_file(label_path, 2049, 1).astype(numpy.int32)
        data = _read_idx_file(data_path, 2051, 3)
        if len(data) != len(label):
            raise ValueError(f"{self._name}: {len(data)} images but {len(label)} labels")
        self._images = data.reshape(len(label), data.shape[1], data.shape[2], 1)
        self._label = label


class FashionMNIST(MNIST):
    """Fashion-MNIST, in MNIST's file format and names, from ``root``."""

    _name = "FashionMNIST"

    def __init__(self, root: str = os.path.join("~", ".mxnet", "datasets", "fashion-mnist"),
                 train: bool = True, transform: Transform | None = None) -> None:
        super().__init__(root, train, transform)


class CIFAR10(_InMemoryImages):
    """CIFAR-10's binary version from ``root`` (or ``root/cifar-10-batches-bin``):
    ``data_batch_1.bin`` … ``data_batch_5.bin`` and ``test_batch.bin``. Samples: (32, 32, 3)
    uint8 RGB images and int32 labels."""

    _name = "CIFAR10"
    _subfolder = "cifar-10-batches-bin"
    _label_bytes = 1

    def __init__(self, root: str = os.path.join("~", ".mxnet", "datasets", "cifar10"),
                 train: bool = True, transform: Transform | None = None) -> None:
        self._train = train
        super().__init__(root, transform)

    def _files(self) -> list[str]:
        if self._train:
            return [f"data_batch_{i}.bin" for i in range(1, 6)]
        return ["test_batch.bin"]

    def _label_column(self) -> int:
        return 0

    def _get_data(self) -> None:
        names = self._files()
        folder = next((f for f in (self._root, os.path.join(self._root, self._subfolder))
                       if all(os.path.isfile(os.path.join(f, n)) for n in names)), None)
        if folder is None:
            missing = [n for n in names if not os.path.isfile(os.path.join(self._root, n))]
            raise _missing(self._root, missing, self._name)
        width = 3072 + self._label_bytes
        data, label = [], []
        for name in names:
            raw = numpy.fromfile(os.path.join(folder, name), numpy.uint8)
            if raw.size % width:
                raise ValueError(f"{name}: {raw.size} bytes is not a whole number of "
                                 f"{width}-byte records")
            rows = raw.reshape(-1, width)
            data.append(rows[:, self._label_bytes:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
            label.append(rows[:, self._label_column()].astype(numpy.int32))
        self._images = numpy.ascontiguousarray(numpy.concatenate(data))
        self._label = numpy.concatenate(label)


class CIFAR100(CIFAR10):
    """CIFAR-100's binary version (``train.bin``, ``test.bin``) from ``root`` (or
    ``root/cifar-100-binary``); ``fine_label`` picks the 100 classes over the 20
    super-classes."""

    _name = "CIFAR100"
    _subfolder = "cifar-100-binary"
    _label_bytes = 2

    def __init__(self, root: str = os.path.join("~", ".mxnet", "datasets", "cifar100"),
                 fine_label: bool = False, train: bool = True,
                 transform: Transform | None = None) -> None:
        self._fine_label = fine_label
        super().__init__(root, train, transform)

    def _files(self) -> list[str]:
        return ["train.bin"] if self._train else ["test.bin"]

    def _label_column(self) -> int:
        return int(self._fine_label)


class ImageRecordDataset(RecordFileDataset):
    """Images in a RecordIO file (with its ``.idx`` beside it), as written by ``im2rec`` or
    ``recordio.pack_img``. ``flag``: 1 for RGB, 0 for grayscale. Samples:
    (HWC uint8 NDArray, label: float or float32 array)."""

    def __init__(self, filename: str, flag: int = 1, transform: Transform | None = None) -> None:
        super().__init__(filename)
        self._flag = flag
        self._transform = transform

    def __getitem__(self, idx: int) -> Any:
        header, payload = unpack(super().__getitem__(idx))
        img = NDArray(image.decode(payload, self._flag), _CPU)
        if self._transform is not None:
            return self._transform(img, header.label)
        return img, header.label


_IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")


class ImageFolderDataset(Dataset):
    """Images in one folder per class under ``root`` (``root/car/0001.jpg``...).

    Classes are the sub-folders in sorted order (``synsets[label]`` is the name); files in
    each are sorted; other files are skipped with a warning, as MXNet does. ``items`` is the
    list of (path, label).
    """

    def __init__(self, root: str, flag: int = 1, transform: Transform | None = None) -> None:
        self._root = os.path.expanduser(root)
        self._flag = flag
        self._transform = transform
        self._exts = list(_IMAGE_EXTENSIONS)
        self.synsets: list[str] = []
        self.items: list[tuple[str, int]] = []
        for folder in sorted(os.listdir(self._root)):
            path = os.path.join(self._root, folder)
            if not os.path.isdir(path):
                warnings.warn(f"Ignoring {path}, which is not a directory.", stacklevel=2)
                continue
            label = len(self.synsets)
            self.synsets.append(folder)
            for filename in sorted(os.listdir(path)):
                filename = os.path.join(path, filename)
                ext = os.path.splitext(filename)[1]
                if ext.lower() not in self._exts:
                    warnings.warn(f"Ignoring {filename} of type {ext}. Only support "
                                  f"{', '.join(self._exts)}", stacklevel=2)
                    continue
                self.items.append((filename, label))

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, idx: int) -> Any:
        path, label = self.items[idx]
        img = image.imread(path, self._flag)
        if self._transform is not None:
            return self._transform(img, label)
        return img, label


class ImageListDataset(Dataset):
    """Images named by a list: a ``.lst`` file under ``root`` (``index<TAB>label(s)<TAB>path``
    lines, as im2rec writes) or a Python list of ``[label..., path]``. Samples:
    (HWC uint8 NDArray, float32 label array)."""

    def __init__(self, root: str = ".", imglist: str | list[Any] | None = None,
                 flag: int = 1) -> None:
        self._root = os.path.expanduser(root)
        self._flag = flag
        self._items: list[tuple[numpy.ndarray, str]] = []
        if isinstance(imglist, str):
            path = os.path.join(self._root, imglist)
            with open(path, encoding="utf-8") as fin:
                for number, line in enumerate(fin, start=1):
                    fields = line.strip().split("\t")
                    if fields == [""]:
                        continue
                    try:
                        label = numpy.array([float(v) for v in fields[1:-1]], numpy.float32)
                        int(fields[0])
                    except ValueError:
                        raise ValueError(f"{path}:{number}: expected 'index<TAB>label...<TAB>"
                                         f"path', got {line.strip()!r}") from None
                    if len(fields) < 3:
                        raise ValueError(f"{path}:{number}: expected 'index<TAB>label..."
                                         f"<TAB>path', got {line.strip()!r}")
                    self._items.append((label, os.path.join(self._root, fields[-1])))
        elif isinstance(imglist, list):
            for entry in imglist:
                if not isinstance(entry[-1], str):
                    raise ValueError(f"each entry must end with an image path, got {entry!r}")
                values = entry[:-1] if len(entry) > 2 else entry[0]
                label = numpy.atleast_1d(numpy.asarray(values, numpy.float32))
                self._items.append((label, os.path.join(self._root, entry[-1])))
        else:
            raise ValueError(f"imglist must be filename or list of valid entries, given "
                             f"{type(imglist)}")

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, idx: int) -> Any:
        label, path = self._items[idx]
        return image.imread(path, self._flag), NDArray(label, _CPU)


__all__ = ["CIFAR10", "CIFAR100", "FashionMNIST", "ImageFolderDataset", "ImageListDataset",
           "ImageRecordDataset", "MNIST"]
