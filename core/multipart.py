"""Writers for the parts of a multipart upload (see ObjectStore.part_writer)."""

from __future__ import annotations

import os
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

# (part number, etag) pairs of a multipart upload; an alias because ``list`` is also a
# method name of the stores.
Parts = list[tuple[int, str]]


class PartWriter(ABC):
    """Receives one part's bytes; ``commit`` stores it and returns its etag, ``discard``
    drops what was written (a part that failed its checksum)."""

    @abstractmethod
    def write(self, data: bytes) -> None: ...

    @abstractmethod
    def commit(self) -> str: ...

    @abstractmethod
    def discard(self) -> None: ...


class InPlacePartWriter(PartWriter):
    """Writes straight into the assembled file at the part's offset. A discarded part
    leaves garbage in its range, which a later send of that part overwrites; the caller
    must not record a discarded part."""

    def __init__(self, target: Path, offset: int, *, etag: str):
        self._handle = open(target, "rb+", buffering=0)  # noqa: SIM115 - closed below
        self._handle.seek(offset)
        self._etag = etag

    def write(self, data: bytes) -> None:
        self._handle.write(data)

    def commit(self) -> str:
        self._handle.close()
        return self._etag

    def discard(self) -> None:
        self._handle.close()


class SpooledPartWriter(PartWriter):
    """Spools the part to a local temp file, then hands it to ``upload`` (S3)."""

    def __init__(self, upload: Callable[[str], str]):
        fd, self._path = tempfile.mkstemp(prefix="rudder-part-")
        self._handle = os.fdopen(fd, "wb", buffering=1024 * 1024)
        self._upload = upload

    def write(self, data: bytes) -> None:
        self._handle.write(data)

    def commit(self) -> str:
        self._handle.close()
        try:
            return str(self._upload(self._path))
        finally:
            Path(self._path).unlink(missing_ok=True)

    def discard(self) -> None:
        self._handle.close()
        Path(self._path).unlink(missing_ok=True)
