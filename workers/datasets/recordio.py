"""MXNet RecordIO (``.rec`` + ``.idx``, as ``im2rec`` and ``MXIndexedRecordIO`` write
them): every record the index names is read and its framing checked; images are
decoded (all of them, or an even sample of large sets) for the stats.

Framing (dmlc-core's recordio): ``uint32 magic 0xced7230a``, ``uint32 lrecord`` whose top
3 bits are the continuation flag and low 29 bits the length, the payload, zero padding
to 4 bytes. A payload that contained the magic is split into parts (flags 1, 2, 3) that
the reader joins with the magic. The payload starts with MXNet's ``IRHeader``
(``uint32 flag, float32 label, uint64 id, uint64 id2``; ``flag`` > 0 means ``flag``
float32 labels follow) and then the encoded image.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

from core.dataset_stats import ImageStatsAccumulator
from workers.datasets.summary import InvalidDataset, Summary, decode_image

MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", MAGIC)
_IR_HEADER = struct.Struct("<IfQQ")
MAX_IDX_LINE = 256
# Decoding is the slow part; past this many records the stats come from an even sample.
MAX_DECODED_RECORDS = 20_000


def read_index(path: Path, rec_size: int) -> list[tuple[str, int]]:
    entries = []
    with open(path, "rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            if len(raw) > MAX_IDX_LINE:
                raise InvalidDataset(f".idx line {line_number} is too long")
            line = raw.strip()
            if not line:
                continue
            fields = line.split(b"\t")
            if len(fields) != 2 or not fields[1].isdigit():
                raise InvalidDataset(
                    f".idx line {line_number} is not 'key<TAB>offset': {line[:60]!r}"
                )
            offset = int(fields[1])
            if offset + 8 > rec_size:
                raise InvalidDataset(
                    f".idx line {line_number} points at byte {offset}, past the end of the "
                    f".rec ({rec_size} bytes)"
                )
            entries.append((fields[0].decode("ascii", "replace"), offset))
    if not entries:
        raise InvalidDataset("the .idx names no records")
    return entries


def read_record(handle: BinaryIO, offset: int, rec_size: int) -> bytes:
    """The payload of the record at ``offset``, joined from its parts."""
    handle.seek(offset)
    pieces: list[bytes] = []
    position = offset
    while True:
        head = handle.read(8)
        if len(head) < 8:
            raise InvalidDataset(f"record at byte {offset} is truncated")
        magic, lrecord = struct.unpack("<II", head)
        if magic != MAGIC:
            raise InvalidDataset(f"record at byte {position} does not start with the "
                                 "RecordIO magic (corrupt record or wrong offset)")
        flag, length = lrecord >> 29, lrecord & ((1 << 29) - 1)
        padded = (length + 3) & ~3
        if position + 8 + padded > rec_size:
            raise InvalidDataset(f"record at byte {position} claims {length} bytes, past "
                                 "the end of the .rec")
        pieces.append(handle.read(length))
        handle.seek(padded - length, 1)
        position += 8 + padded
        first = len(pieces) == 1
        # 0: a whole record; 1: the first part of a split one, 2: a middle part, 3: the last.
        if flag > 3 or (flag in (0, 1)) != first:
            raise InvalidDataset(f"record at byte {offset} has an invalid continuation flag")
        if flag in (0, 3):
            break
    return _MAGIC_BYTES.join(pieces)


def split_payload(payload: bytes, where: str) -> tuple[float, bytes]:
    """(label, image bytes) of one record (the first label when there are several)."""
    if len(payload) < _IR_HEADER.size:
        raise InvalidDataset(f"{where} is shorter than MXNet's record header")
    flag, label, _, _ = _IR_HEADER.unpack_from(payload)
    start = _IR_HEADER.size
    if flag > 0:
        if start + 4 * flag > len(payload) or flag > 4096:
            raise InvalidDataset(f"{where} claims {flag} labels that are not there")
        (label,) = struct.unpack_from("<f", payload, start)
        start += 4 * flag
    return float(label), payload[start:]


def validate_recordio(rec: Path, idx: Path) -> Summary:
    rec_size = rec.stat().st_size
    entries = read_index(idx, rec_size)
    stride = max(1, len(entries) // MAX_DECODED_RECORDS)
    stats = ImageStatsAccumulator()
    labels: set[float] = set()
    with open(rec, "rb") as handle:
        for number, (key, offset) in enumerate(entries):
            where = f"record {key} (byte {offset})"
            payload = read_record(handle, offset, rec_size)
            label, image_bytes = split_payload(payload, where)
            labels.add(label)
            if number % stride == 0:
                try:
                    stats.add(decode_image(image_bytes, where), label)
                except InvalidDataset:
                    raise
                except ValueError as exc:
                    raise InvalidDataset(f"{where}: {exc}") from exc
    result = stats.result()
    result["records"] = len(entries)
    result["classes"] = len(labels)
    if stride > 1:
        result["sampled_records"] = stats.records
    common = next(iter(result["image_sizes"]), "0x0")
    height, width = (int(n) for n in common.split("x"))
    return Summary(
        num_rows=len(entries), feature_shape=[height, width, stats.channels or 0],
        dtype="uint8", num_classes=len(labels), stats=result,
    )
