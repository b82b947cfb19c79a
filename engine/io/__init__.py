"""Data iterators (``mxnet.io``): in-memory arrays (``NDArrayIter``), files (``CSVIter``,
``MNISTIter``), image records (``ImageRecordIter``) and the wrappers ``ResizeIter`` and
``PrefetchingIter``.

>>> import numpy as np
>>> from engine.io import NDArrayIter
>>> it = NDArrayIter(np.arange(10).reshape(5, 2), np.arange(5), batch_size=2)
>>> [b.pad for b in it]
[0, 0, 1]
"""

from __future__ import annotations

from typing import Any

from . import io, utils
from .file_iters import CSVIter, MNISTIter
from .io import DataBatch, DataDesc, DataIter, NDArrayIter, PrefetchingIter, ResizeIter

_RECORD_ITERS = ("ImageRecordIter", "ImageRecordUInt8Iter", "ImageRecordIter_v1",
                 "ImageRecordUInt8Iter_v1")


def __getattr__(name: str) -> Any:
    # the image record iterators need Pillow: imported on first use so `engine.io` stays light
    if name in _RECORD_ITERS:
        from ..image import record_iter

        return getattr(record_iter, name.removesuffix("_v1"))
    raise AttributeError(f"module 'engine.io' has no attribute {name!r}")


__all__ = ["CSVIter", "DataBatch", "DataDesc", "DataIter", "MNISTIter", "NDArrayIter",
           "PrefetchingIter", "ResizeIter", "io", "utils"]
__all__ += list(_RECORD_ITERS)  # noqa: PLE0605 - from __getattr__
