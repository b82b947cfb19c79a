"""``.npz`` data sets read and written as streams, never whole in memory.

Checking reads each member's ``.npy`` header first (core.npy_header: plain literals, a
numeric dtype, a size that matches the member), checks the shapes, then reads the array
in blocks of ``BLOCK_BYTES``: each block is checked for NaN/infinities and added to the
stats, then dropped. A 6 MiB deflated npz that inflates to 48 MiB costs a few MiB of
memory, not the 0.5 GB that loading it took.

Writing (a CSV converted to npz) copies raw array files into an uncompressed zip member by
member, so the arrays are never held either. Nothing is ever unpickled.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np
from numpy.lib import format as npy_format

from core.dataset_checks import (
    BLOCK_BYTES,
    DatasetError,
    DatasetSummary,
    check_finite,
    check_shapes,
)
from core.dataset_stats import ChannelMoments, LabelTally, summarise
from core.npy_header import MAX_HEADER_BYTES, NpyHeader, NpyHeaderError, parse_npy_header

REQUIRED_ARRAYS = ("data", "label")
# npz members are zip entries; cap how much they may inflate to stop zip bombs.
MAX_INFLATION = 8


def _refusal(exc: NpyHeaderError) -> DatasetError:
    if "numeric" in str(exc) and "object" in str(exc):
        return DatasetError("the .npz contains pickled (object) arrays, which are never loaded")
    return DatasetError(f"cannot read the .npz: {exc}")


@dataclass
class _Member:
    """One array of the archive: its header and the first data bytes read with it."""

    info: zipfile.ZipInfo
    header: NpyHeader
    head: bytes


def _read_header(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> _Member:
    with archive.open(info) as handle:
        prefix = handle.read(min(info.file_size, MAX_HEADER_BYTES + 12))
    try:
        header = parse_npy_header(prefix)
    except NpyHeaderError as exc:
        raise _refusal(exc) from exc
    available = info.file_size - header.data_offset
    if available != header.nbytes:
        raise _refusal(NpyHeaderError(
            f"the .npy header claims shape {header.shape} ({header.nbytes} bytes) but the "
            f"file holds {available} bytes of data"))
    return _Member(info, header, prefix[header.data_offset:])


def _blocks(archive: zipfile.ZipFile, member: _Member) -> Iterator[np.ndarray]:
    """The member's array as flat blocks of whole elements, in its stored order."""
    itemsize = member.header.dtype.itemsize
    step = max(itemsize, BLOCK_BYTES // itemsize * itemsize)
    remaining = member.header.nbytes
    with archive.open(member.info) as handle:
        handle.read(member.header.data_offset)
        while remaining > 0:
            raw = handle.read(min(step, remaining))
            if not raw or len(raw) % itemsize:
                raise DatasetError("the .npz is truncated (an array ends early)")
            remaining -= len(raw)
            yield np.frombuffer(raw, dtype=member.header.dtype)
        if handle.read(1):  # also makes zipfile check the member's CRC
            raise DatasetError("an array of the .npz holds more bytes than its header says")


def check_npz(source: BinaryIO, *, size: int, max_rows: int, max_features: int) -> DatasetSummary:
    """Check an npz (a seekable binary file of ``size`` bytes) block by block."""
    try:
        with zipfile.ZipFile(source) as archive:
            infos = {info.filename: info for info in archive.infolist()}
            inflated = sum(info.file_size for info in infos.values())
            if inflated > MAX_INFLATION * max(size, 1) + 1_000_000:
                raise DatasetError("the .npz inflates too much; refusing to load it")
            found = sorted(name.removesuffix(".npy") for name in infos)
            if found != sorted(REQUIRED_ARRAYS):
                raise DatasetError(
                    f"the .npz must hold exactly the arrays 'data' and 'label', found {found}"
                )
            members = {name.removesuffix(".npy"): _read_header(archive, info)
                       for name, info in infos.items()}
            data, label = members["data"].header, members["label"].header
            check_shapes(data.dtype, data.shape, label.dtype, label.shape,
                         max_rows=max_rows, max_features=max_features)
            moments = ChannelMoments(data.shape, fortran_order=data.fortran_order)
            for block in _blocks(archive, members["data"]):
                check_finite("data", block)
                moments.add(block)
            labels = LabelTally()
            for block in _blocks(archive, members["label"]):
                check_finite("label", block)
                labels.add(block)
    except DatasetError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
        raise DatasetError("not a valid .npz file (expected a zip of .npy arrays)") from exc
    return DatasetSummary(
        format="npz", num_rows=int(data.shape[0]),
        feature_shape=[int(n) for n in data.shape[1:]], dtype=str(data.dtype),
        num_classes=labels.num_classes(label.dtype.kind) if len(label.shape) == 1 else None,
        stats=summarise(data.shape, moments, labels, label_kind=label.dtype.kind,
                        label_ndim=len(label.shape)),
    )


@dataclass(frozen=True)
class RawArray:
    """An array stored as raw C-order bytes in ``source`` (``stored`` dtype); written to
    the npz as ``dtype`` (converted block by block when the two differ)."""

    name: str
    source: BinaryIO
    stored: np.dtype
    dtype: np.dtype
    shape: tuple[int, ...]


def write_npz(target: BinaryIO, arrays: list[RawArray]) -> None:
    """An uncompressed npz (what ``np.savez`` writes) from raw array files."""
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for array in arrays:
            with zf.open(array.name + ".npy", "w", force_zip64=True) as member:
                npy_format.write_array_header_1_0(member, {
                    "descr": npy_format.dtype_to_descr(array.dtype),
                    "fortran_order": False, "shape": array.shape})
                array.source.seek(0)
                step = BLOCK_BYTES // array.stored.itemsize * array.stored.itemsize
                while raw := array.source.read(step):
                    member.write(np.frombuffer(raw, dtype=array.stored)
                                 .astype(array.dtype, copy=False).tobytes())
