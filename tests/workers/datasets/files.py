"""Builders of small data-set files for validation tests: images, RecordIO, archives."""

from __future__ import annotations

import io
import struct
import tarfile
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image

MAGIC = 0xCED7230A


def png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def images(count: int, *, height: int = 6, width: int = 8, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8) for _ in range(count)]


def record(label: float, index: int, payload: bytes) -> bytes:
    """One RecordIO record (IRHeader + payload), framed and padded."""
    body = struct.pack("<IfQQ", 0, label, index, 0) + payload
    return struct.pack("<II", MAGIC, len(body)) + body + b"\0" * (-len(body) % 4)


def recordio(payloads: list[tuple[float, bytes]]) -> tuple[bytes, bytes]:
    """(.rec bytes, .idx bytes) the way MXIndexedRecordIO writes them."""
    rec, idx = b"", b""
    for index, (label, payload) in enumerate(payloads):
        idx += f"{index}\t{len(rec)}\n".encode()
        rec += record(label, index, payload)
    return rec, idx


def zip_of(members: dict[str, bytes], *, symlinks: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o120777 << 16)
            archive.writestr(info, target)
    return buffer.getvalue()


def tar_of(members: dict[str, bytes], *, symlinks: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for name, target in (symlinks or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            archive.addfile(info)
    return buffer.getvalue()


def write_csv(path: Path, size_bytes: int, *, features: int = 20, seed: int = 0) -> int:
    """A numeric CSV of about ``size_bytes`` (a header with ``label``, then rows of
    ``features`` floats and an integer label), written as a block of distinct rows
    repeated, so gigabytes take seconds. Returns the number of data rows."""
    rng = np.random.default_rng(seed)
    values = rng.normal(size=(1000, features)).astype(np.float32)
    block = "".join(",".join(f"{v:.6g}" for v in row) + f",{index % 10}\n"
                    for index, row in enumerate(values)).encode()
    header = (",".join(f"f{i}" for i in range(features)) + ",label\n").encode()
    repeats = max(1, (size_bytes - len(header)) // len(block))
    with open(path, "wb") as handle:
        handle.write(header)
        for _ in range(repeats):
            handle.write(block)
    return repeats * 1000
