"""Validation of ``.npz`` and CSV data sets, streamed with bounded memory
(core.dataset_npz, core.dataset_csv): in the api for small single-request uploads
(``POST /v1/datasets`` up to ``limits.inline_validation_bytes``), in a validation worker
for everything else.

Every set is stored as, or converted to, an ``.npz`` with exactly two arrays, ``data``
and ``label``, so the training loader has one format. Nothing is ever unpickled: ``.npy``
headers are parsed with strict limits (core.npy_header) and arrays are read block by
block from the bytes actually present; object arrays are refused.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from dataclasses import dataclass
from typing import BinaryIO

from core.dataset_checks import LABEL_COLUMN, DatasetError, DatasetSummary
from core.dataset_csv import convert_csv
from core.dataset_npz import REQUIRED_ARRAYS, check_npz

__all__ = [
    "LABEL_COLUMN", "REQUIRED_ARRAYS", "DatasetError", "DatasetSummary", "ValidatedDataset",
    "table_format", "validate_csv", "validate_npz", "validate_table", "validate_upload",
]

TABLE_FORMATS = {".npz": "npz", ".csv": "csv"}


def table_format(filename: str) -> str:
    """``npz`` or ``csv`` from the file name; anything else is refused."""
    for suffix, fmt in TABLE_FORMATS.items():
        if filename.lower().endswith(suffix):
            return fmt
    raise DatasetError("unsupported file type; upload a .npz or a .csv", field="file")


def validate_table(
    fmt: str, source: BinaryIO, *, converted: BinaryIO | None, max_rows: int,
    max_features: int,
) -> DatasetSummary:
    """Check an npz or CSV held in ``source`` (a seekable binary file). A CSV is written to
    ``converted`` as an npz (required for CSV); an npz is used as it is."""
    source.seek(0, os.SEEK_END)
    size = source.tell()
    source.seek(0)
    if fmt == "npz":
        return check_npz(source, size=size, max_rows=max_rows, max_features=max_features)
    if fmt == "csv":
        if converted is None:
            raise ValueError("a CSV needs a file to be converted into")
        return convert_csv(source, converted, max_rows=max_rows, max_features=max_features)
    raise DatasetError(f"unknown table format {fmt!r}")


@dataclass(frozen=True)
class ValidatedDataset(DatasetSummary):
    """A summary plus the npz to store and its sha256 (the in-memory helpers below)."""

    npz_bytes: bytes
    sha256: str


def _validate_bytes(fmt: str, raw: bytes, *, max_rows: int,
                    max_features: int) -> ValidatedDataset:
    with tempfile.TemporaryFile() as converted:
        summary = validate_table(fmt, io.BytesIO(raw), converted=converted,
                                 max_rows=max_rows, max_features=max_features)
        if fmt == "csv":
            converted.seek(0)
            raw = converted.read()
    return ValidatedDataset(**vars(summary), npz_bytes=raw,
                            sha256=hashlib.sha256(raw).hexdigest())


def validate_npz(raw: bytes, *, max_rows: int, max_features: int) -> ValidatedDataset:
    """:func:`validate_table` for an npz already in memory."""
    return _validate_bytes("npz", raw, max_rows=max_rows, max_features=max_features)


def validate_csv(raw: bytes, *, max_rows: int, max_features: int) -> ValidatedDataset:
    """:func:`validate_table` for a CSV already in memory; ``npz_bytes`` is the npz."""
    return _validate_bytes("csv", raw, max_rows=max_rows, max_features=max_features)


def validate_upload(
    filename: str, raw: bytes, *, max_rows: int, max_features: int
) -> ValidatedDataset:
    """Pick the validator from the file name (``.npz`` or ``.csv``)."""
    return _validate_bytes(table_format(filename), raw, max_rows=max_rows,
                           max_features=max_features)
