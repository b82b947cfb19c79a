"""MXNet's RecordIO files (``mxnet.recordio``), byte for byte as MXNet 1.9.1 writes them.

A ``.rec`` file is a sequence of records. Each record is ``magic`` (``0xced7230a``, little
endian), ``lrecord`` (upper 3 bits: continuation flag, lower 29: payload length), the
payload, and zero padding to a multiple of 4 bytes. A payload that contains the magic
number at a 4-byte-aligned offset is split there into parts (flag 1 = first, 2 = middle,
3 = last; 0 = a whole record) and the magic is put back on reading, so a reader can always
resynchronise on the magic. The ``.idx`` file written by :class:`MXIndexedRecordIO` is text,
one ``key<TAB>offset`` line per record.

Reading is strict: a bad magic, a length that runs past the end of the file or an index
entry that points outside the file raises :class:`RecordIOError` naming the offset.

>>> import os, tempfile
>>> from engine import recordio
>>> folder = tempfile.mkdtemp()
>>> rec, idx = os.path.join(folder, "a.rec"), os.path.join(folder, "a.idx")
>>> writer = recordio.MXIndexedRecordIO(idx, rec, "w")
>>> for i in range(3):
...     writer.write_idx(i, recordio.pack(recordio.IRHeader(0, float(i), i, 0), b"x" * i))
>>> writer.close()
>>> reader = recordio.MXIndexedRecordIO(idx, rec, "r")
>>> header, payload = recordio.unpack(reader.read_idx(2))
>>> header.label, payload
(2.0, b'xx')
"""

from __future__ import annotations

import numbers
import os
import struct
from collections import namedtuple
from typing import Any

import numpy

from .base import MXNetError

MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", MAGIC)
_MAX_LENGTH = (1 << 29) - 1  # 29 bits of length in lrecord
_FLAG_WHOLE, _FLAG_FIRST, _FLAG_MIDDLE, _FLAG_LAST = 0, 1, 2, 3


class RecordIOError(MXNetError, ValueError):
    """A RecordIO or index file is malformed (bad magic, truncated record, bad offset)."""


def _padded(length: int) -> int:
    return (length + 3) & ~3


def encode_record(payload: bytes) -> bytes:
    """The bytes MXNet's writer puts in the file for one record (split at aligned magics)."""
    if len(payload) > _MAX_LENGTH:
        raise ValueError(f"RecordIO only accepts records shorter than 2^29 bytes, "
                         f"got {len(payload)}")
    out = bytearray()
    start = 0
    aligned_end = len(payload) & ~3
    position = payload.find(_MAGIC_BYTES)
    while 0 <= position < aligned_end:
        if position % 4 == 0:
            flag = _FLAG_FIRST if start == 0 else _FLAG_MIDDLE
            out += _MAGIC_BYTES + struct.pack("<I", (flag << 29) | (position - start))
            out += payload[start:position]
            start = position + 4
            position = payload.find(_MAGIC_BYTES, start)
        else:
            position = payload.find(_MAGIC_BYTES, position + 1)
    flag = _FLAG_LAST if start else _FLAG_WHOLE
    out += _MAGIC_BYTES + struct.pack("<I", (flag << 29) | (len(payload) - start))
    out += payload[start:]
    out += b"\0" * (_padded(len(payload)) - len(payload))
    return bytes(out)


def read_record_at(fd: int, offset: int, file_size: int) -> tuple[bytes, int]:
    """The payload of the record that starts at ``offset`` and the offset after it.

    Uses positional reads only, so several threads may read one descriptor at once.
    """
    parts: list[bytes] = []
    position = offset
    while True:
        if position + 8 > file_size:
            raise RecordIOError(f"truncated record at offset {position}: the file ends at "
                                f"{file_size}")
        head = os.pread(fd, 8, position)
        magic, lrecord = struct.unpack("<II", head)
        if magic != MAGIC:
            raise RecordIOError(f"corrupt record at offset {position}: bad magic 0x{magic:08x}")
        flag, length = lrecord >> 29, lrecord & _MAX_LENGTH
        end = position + 8 + _padded(length)
        if end > file_size:
            raise RecordIOError(f"truncated record at offset {position}: {length} bytes "
                                f"announced, the file ends at {file_size}")
        expected = (_FLAG_WHOLE, _FLAG_FIRST) if not parts else (_FLAG_MIDDLE, _FLAG_LAST)
        if flag not in expected:
            raise RecordIOError(f"corrupt record at offset {position}: continuation flag "
                                f"{flag} out of sequence")
        parts.append(os.pread(fd, length, position + 8))
        position = end
        if flag in (_FLAG_WHOLE, _FLAG_LAST):
            return _MAGIC_BYTES.join(parts), position


_HEAD = struct.Struct("<II")
_ONE_READ_MAX = 1 << 22  # a longer span (a gap in the index) is read the careful way


def read_record_within(fd: int, offset: int, span: int, file_size: int) -> bytes:
    """:func:`read_record_at` for a record that ends within ``span`` bytes of ``offset``
    (the distance to the next record in the file): one read instead of two. A record in
    several parts, or anything unexpected, goes through :func:`read_record_at`, which also
    says what is wrong."""
    if 8 <= span <= _ONE_READ_MAX:
        block = os.pread(fd, span, offset)
        if len(block) >= 8:
            magic, lrecord = _HEAD.unpack_from(block)
            length = lrecord & _MAX_LENGTH
            if (magic == MAGIC and lrecord >> 29 == _FLAG_WHOLE
                    and 8 + _padded(length) <= len(block)):
                return block[8:8 + length]
    return read_record_at(fd, offset, file_size)[0]


class MXRecordIO:
    """Sequential reader (``flag='r'``) or writer (``flag='w'``) of a RecordIO file.

    ``read()`` returns the next record's bytes, or None at the end of the file.
    """

    def __init__(self, uri: str | os.PathLike[str], flag: str) -> None:
        self.uri = os.fspath(uri)
        self.flag = flag
        self.is_open = False
        self._fd = -1
        self._position = 0
        self._size = 0
        self.open()

    @property
    def writable(self) -> bool:
        return self.flag == "w"

    def open(self) -> None:
        """Open (or reopen, from the start) the file."""
        if self.flag == "w":
            self._fd = os.open(self.uri, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        elif self.flag == "r":
            self._fd = os.open(self.uri, os.O_RDONLY)
            self._size = os.fstat(self._fd).st_size
        else:
            raise ValueError(f"Invalid flag {self.flag}")
        self._position = 0
        self.is_open = True

    def close(self) -> None:
        """Close the file (a no-op when already closed)."""
        if self.is_open:
            os.close(self._fd)
            self.is_open = False

    def __del__(self) -> None:
        if getattr(self, "is_open", False):
            self.close()

    def __enter__(self) -> MXRecordIO:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reset(self) -> None:
        """Go back to the start of the file (reading), or truncate it (writing)."""
        self.close()
        self.open()

    def write(self, buf: bytes | str) -> None:
        """Append one record."""
        if not self.writable:
            raise MXNetError("write on a RecordIO opened for reading")
        data = buf.encode() if isinstance(buf, str) else bytes(buf)
        encoded = encode_record(data)
        os.write(self._fd, encoded)
        self._position += len(encoded)

    def read(self) -> bytes | None:
        """The next record, or None at the end of the file."""
        if self.writable:
            raise MXNetError("read on a RecordIO opened for writing")
        if self._position >= self._size:
            return None
        payload, self._position = read_record_at(self._fd, self._position, self._size)
        return payload

    def tell(self) -> int:
        """The byte offset where the next record will be written (or read)."""
        return self._position


class MXIndexedRecordIO(MXRecordIO):
    """RecordIO with an index file for random access by key (``read_idx``/``write_idx``).

    Reading is thread-safe: ``read_idx`` uses positional reads and no shared file offset.
    """

    def __init__(self, idx_path: str | os.PathLike[str], uri: str | os.PathLike[str],
                 flag: str, key_type: type = int) -> None:
        self.idx_path = os.fspath(idx_path)
        self.idx: dict[Any, int] = {}
        self.keys: list[Any] = []
        self.key_type = key_type
        self.fidx: Any = None
        super().__init__(uri, flag)

    def open(self) -> None:
        super().open()
        self.idx = {}
        self.keys = []
        self.fidx = open(self.idx_path, self.flag, encoding="utf-8")  # noqa: SIM115
        if not self.writable:
            self._read_index()

    def _read_index(self) -> None:
        for number, line in enumerate(self.fidx, start=1):
            fields = line.strip().split("\t")
            if fields == [""]:
                continue
            try:
                key = self.key_type(fields[0])
                offset = int(fields[1])
            except (IndexError, ValueError):
                raise RecordIOError(f"{self.idx_path}:{number}: expected 'key<TAB>offset', "
                                    f"got {line.strip()!r}") from None
            if not 0 <= offset <= self._size - 8:
                raise RecordIOError(f"{self.idx_path}:{number}: offset {offset} of key "
                                    f"{key!r} points past the end of {self.uri} "
                                    f"({self._size} bytes)")
            self.idx[key] = offset
            self.keys.append(key)

    def close(self) -> None:
        if not self.is_open:
            return
        super().close()
        self.fidx.close()

    def seek(self, idx: Any) -> None:
        """Make the next ``read()`` return the record of key ``idx``."""
        if self.writable:
            raise MXNetError("seek on a RecordIO opened for writing")
        self._position = self.idx[idx]

    def read_idx(self, idx: Any) -> bytes:
        """The record of key ``idx``."""
        if self.writable:
            raise MXNetError("read on a RecordIO opened for writing")
        payload, _ = read_record_at(self._fd, self.idx[idx], self._size)
        return payload

    def write_idx(self, idx: Any, buf: bytes | str) -> None:
        """Append a record and index it under key ``idx``."""
        key = self.key_type(idx)
        position = self.tell()
        self.write(buf)
        self.fidx.write(f"{key}\t{position}\n")
        self.idx[key] = position
        self.keys.append(key)


IRHeader = namedtuple("IRHeader", ["flag", "label", "id", "id2"])
"""Header of an image record: ``flag`` (0, or the number of float labels), ``label``
(a float, or an array when ``flag > 0``), ``id`` and ``id2`` (64-bit ids)."""

_IR_FORMAT = "<IfQQ"
_IR_SIZE = struct.calcsize(_IR_FORMAT)  # 24


def pack(header: Any, s: bytes) -> bytes:
    """A record: the header, then (for array labels) the labels as float32, then ``s``."""
    header = IRHeader(*header)
    if isinstance(header.label, numbers.Number):
        header = header._replace(flag=0)
    else:
        label = numpy.asarray(header.label, dtype=numpy.float32)
        header = header._replace(flag=label.size, label=0)
        s = label.tobytes() + s
    return struct.pack(_IR_FORMAT, *header) + s


def unpack(s: bytes) -> tuple[Any, bytes]:
    """Split a record into its IRHeader and payload (labels as a float32 array if several)."""
    if len(s) < _IR_SIZE:
        raise RecordIOError(f"record of {len(s)} bytes is shorter than its {_IR_SIZE}-byte "
                            f"header")
    header = IRHeader(*struct.unpack(_IR_FORMAT, s[:_IR_SIZE]))
    s = s[_IR_SIZE:]
    if header.flag > 0:
        if len(s) < 4 * header.flag:
            raise RecordIOError(f"record announces {header.flag} labels but has "
                                f"{len(s)} bytes after its header")
        header = header._replace(label=numpy.frombuffer(s, numpy.float32, header.flag))
        s = s[header.flag * 4:]
    return header, s


def unpack_img(s: bytes, iscolor: int = -1) -> tuple[Any, numpy.ndarray]:
    """Header and decoded image (HWC uint8 in **BGR** order, as OpenCV gives in MXNet).

    ``iscolor``: -1 keeps the file's channels, 0 gives grayscale (HW), 1 gives 3 channels.
    """
    from .image import decode_bgr

    header, payload = unpack(s)
    return header, decode_bgr(payload, iscolor)


def pack_img(header: Any, img: numpy.ndarray, quality: int = 95, img_fmt: str = ".jpg") -> bytes:
    """Encode ``img`` (HWC uint8, **BGR** as in OpenCV, or HW gray) and pack it with header.

    ``quality``: JPEG quality (1-100) for ``.jpg``, or PNG compression level (clamped to 0-9,
    as OpenCV does) for ``.png``.
    """
    from .image import encode_bgr

    return pack(header, encode_bgr(img, img_fmt, quality))


__all__ = ["IRHeader", "MXIndexedRecordIO", "MXRecordIO", "RecordIOError", "pack", "pack_img",
           "unpack", "unpack_img"]
