"""Parts of a multipart upload: each send of a part is written to a private staged
object of its own, and the parts become one object only when the upload completes.

Why staged, never in place: a part written straight into the assembled file (the local
store's old way) let a send that arrived after ``complete`` write into the completed data
set's file, and two interleaved sends of one part leave bytes of both. A staged part is
only ever written by its own request; the database then names it as part ``n`` (a
compare-and-set that succeeds only while the upload is open), and completion reads the
named parts, checks each against its sha256 and its size, and writes the object once.
Nothing writes to a completed object again.
"""

from __future__ import annotations

import base64
import hashlib
import os
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class StoredPart:
    """Part ``number`` (1-based within its file) as the database recorded it."""

    number: int
    stored_as: str  # the store's name for the staged part (PartWriter.stored_as)
    sha256: str
    size: int


class PartCorrupt(Exception):
    """A staged part no longer holds what was recorded for it (size or sha256)."""

    def __init__(self, number: int, why: str):
        super().__init__(f"part {number} {why}")
        self.number = number
        self.why = why


class StoredFileCorrupt(Exception):
    """An object assembled from checked parts is not what they make (the store's own
    checksum of it disagrees); it was deleted, the parts stay staged."""


def composite_sha256(part_sha256s: list[str]) -> str:
    """S3's checksum of a multipart object built with SHA-256 parts: the base64 SHA-256
    of the parts' digests, concatenated in order (S3 appends "-<parts>")."""
    joined = b"".join(bytes.fromhex(sha) for sha in part_sha256s)
    return base64.b64encode(hashlib.sha256(joined).digest()).decode()


class PartWriter(ABC):
    """Receives one send of a part. ``finish(sha256)`` makes the staged part durable (the
    caller then records ``stored_as``); ``discard`` drops it, also after ``finish``."""

    stored_as: str

    @abstractmethod
    def write(self, data: bytes) -> None: ...

    @abstractmethod
    def finish(self, sha256: str) -> None: ...

    @abstractmethod
    def discard(self) -> None: ...


class LocalPartWriter(PartWriter):
    """Writes the part to its own file in the upload's staging folder."""

    def __init__(self, path: Path, stored_as: str):
        self.stored_as = stored_as
        self._path = path
        self._handle = open(path, "xb", buffering=1024 * 1024)  # noqa: SIM115 - closed below

    def write(self, data: bytes) -> None:
        self._handle.write(data)

    def finish(self, sha256: str) -> None:
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()

    def discard(self) -> None:
        self._handle.close()
        self._path.unlink(missing_ok=True)


class SpooledPartWriter(PartWriter):
    """Spools the part to a local temp file, then ``upload(path, sha256)`` stores it as a
    staged object (S3); ``drop()`` deletes that object again."""

    def __init__(self, stored_as: str, upload: Callable[[str, str], None],
                 drop: Callable[[], None]):
        self.stored_as = stored_as
        fd, self._path = tempfile.mkstemp(prefix="rudder-part-")
        self._handle = os.fdopen(fd, "wb", buffering=1024 * 1024)
        self._upload = upload
        self._drop = drop
        self._uploaded = False

    def write(self, data: bytes) -> None:
        self._handle.write(data)

    def finish(self, sha256: str) -> None:
        self._handle.close()
        try:
            self._upload(self._path, sha256)
            self._uploaded = True
        finally:
            Path(self._path).unlink(missing_ok=True)

    def discard(self) -> None:
        self._handle.close()
        Path(self._path).unlink(missing_ok=True)
        if self._uploaded:
            self._drop()
