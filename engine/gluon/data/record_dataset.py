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

    def __getitem__(self, idx: int) -> bytes:
        return self._record.read_idx(self._record.keys[idx])

    def __len__(self) -> int:
        return len(self._record.keys)
