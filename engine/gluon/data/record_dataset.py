"""``RecordFileDataset``: the raw records of a RecordIO file, by position.

>>> import os, tempfile
>>> from engine import recordio
>>> from engine.gluon.data import RecordFileDataset
>>> rec = os.path.join(tempfile.mkdtemp(), "a.rec")
>>> w = recordio.MXIndexedRecordIO(rec[:-4] + ".idx", rec, "w")
>>> for i in range(3): w.write_idx(i, b"r%d" % i)
>>> w.close()
>>> ds = RecordFileDataset(rec); len(ds), ds[2]
(3, b'r2')
"""

from __future__ import annotations

import os

from ...recordio import read_record_within
from .dataset import Dataset


class RecordFileDataset(Dataset):
    """Records of ``filename`` (a ``.rec``) in the order of its ``.idx`` (same name beside
    it). Reads are positional, so DataLoader worker threads share one open file."""

    def __init__(self, filename: str) -> None:
        from ... import recordio

        self.idx_file = os.path.splitext(filename)[0] + ".idx"
        self.filename = filename
        for path in (filename, self.idx_file):
            if not os.path.isfile(path):
                raise FileNotFoundError(f"RecordFileDataset: {path} does not exist (a .rec "
                                        f"needs its .idx beside it)")
        self._record = recordio.MXIndexedRecordIO(self.idx_file, self.filename, "r")
        # where each record starts and how far it is to the next one (or to the end of the
        # file): a record then costs one positional read, read the .idx once here
        size = os.path.getsize(filename)
        self._starts = [self._record.idx[key] for key in self._record.keys]
        bounds = sorted(set(self._starts)) + [size]
        following = dict(zip(bounds[:-1], bounds[1:], strict=True))
        self._spans = [following[start] - start for start in self._starts]
        self._size = size

    def __getitem__(self, idx: int) -> bytes:
        return read_record_within(self._record._fd, self._starts[idx],
                                           self._spans[idx], self._size)

    def __len__(self) -> int:
        return len(self._record.keys)
