"""Validation of ``.npz`` and CSV data sets: in the request for the single-request
upload (``POST /v1/datasets``), in the worker for chunked ones.

The single-request path stores whatever was uploaded as an ``.npz`` with exactly two
arrays, ``data`` and ``label``, so the worker has one loader. Nothing is ever unpickled:
``.npy`` headers are parsed with strict limits (core.npy_header) and the arrays are read
from the bytes actually present; object arrays are refused.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.dataset_stats import array_stats
from core.npy_header import NpyHeaderError, load_npy

REQUIRED_ARRAYS = ("data", "label")
LABEL_COLUMN = "label"
# npz members are zip entries; cap how much they may inflate to stop zip bombs.
MAX_INFLATION = 8


class DatasetError(ValueError):
    """An upload that cannot be accepted; ``field`` names what is wrong."""

    def __init__(self, message: str, *, field: str = "file"):
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ValidatedDataset:
    format: str
    npz_bytes: bytes
    sha256: str
    num_rows: int
    feature_shape: list[int]
    dtype: str
    num_classes: int | None
    stats: dict[str, Any]


def _check_arrays(
    data: np.ndarray, label: np.ndarray, *, max_rows: int, max_features: int
) -> None:
    if data.dtype.kind not in "fiu" or data.dtype.itemsize > 8:
        raise DatasetError(f"data must be a numeric array, got dtype {data.dtype}", field="data")
    if label.dtype.kind not in "fiu":
        raise DatasetError(f"label must be numeric, got dtype {label.dtype}", field="label")
    if data.ndim < 1 or data.ndim > 5:
        raise DatasetError(f"data must have 1 to 5 dimensions, got {data.ndim}", field="data")
    if label.ndim not in (1, 2):
        raise DatasetError(f"label must have 1 or 2 dimensions, got {label.ndim}", field="label")
    rows = data.shape[0]
    if rows < 1 or rows > max_rows:
        raise DatasetError(f"data must have 1 to {max_rows} rows, got {rows}", field="data")
    if label.shape[0] != rows:
        raise DatasetError(
            f"label has {label.shape[0]} rows but data has {rows}", field="label"
        )
    features = int(np.prod(data.shape[1:], dtype=np.int64)) if data.ndim > 1 else 1
    if features > max_features:
        raise DatasetError(f"too many features per row ({features} > {max_features})")
    for name, array in (("data", data), ("label", label)):
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            raise DatasetError(f"{name} contains NaN or infinite values", field=name)


def _num_classes(label: np.ndarray) -> int | None:
    if label.ndim == 1 and label.dtype.kind in "iu" and label.size and label.min() >= 0:
        return int(label.max()) + 1
    return None


def _to_npz(data: np.ndarray, label: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, data=data, label=label)
    return buffer.getvalue()


def _result(fmt: str, data: np.ndarray, label: np.ndarray, raw: bytes) -> ValidatedDataset:
    return ValidatedDataset(
        format=fmt,
        npz_bytes=raw,
        sha256=hashlib.sha256(raw).hexdigest(),
        num_rows=int(data.shape[0]),
        feature_shape=[int(n) for n in data.shape[1:]],
        dtype=str(data.dtype),
        num_classes=_num_classes(label),
        stats=array_stats(data, label),
    )


def validate_npz(raw: bytes, *, max_rows: int, max_features: int) -> ValidatedDataset:
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            members = {info.filename: info for info in archive.infolist()}
            inflated = sum(info.file_size for info in members.values())
            allowed = MAX_INFLATION * max(len(raw), 1) + 1_000_000
            if inflated > allowed:
                raise DatasetError("the .npz inflates too much; refusing to load it")
            found = sorted(name.removesuffix(".npy") for name in members)
            if found != sorted(REQUIRED_ARRAYS):
                raise DatasetError(
                    f"the .npz must hold exactly the arrays 'data' and 'label', found {found}"
                )
            arrays = {
                name.removesuffix(".npy"): load_npy(archive.read(name), max_bytes=allowed)
                for name in members
            }
    except DatasetError:
        raise
    except NpyHeaderError as exc:
        if "numeric" in str(exc) and "object" in str(exc):
            raise DatasetError(
                "the .npz contains pickled (object) arrays, which are never loaded"
            ) from exc
        raise DatasetError(f"cannot read the .npz: {exc}") from exc
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
        raise DatasetError("not a valid .npz file (expected a zip of .npy arrays)") from exc
    data, label = arrays["data"], arrays["label"]
    _check_arrays(data, label, max_rows=max_rows, max_features=max_features)
    return _result("npz", data, label, raw)


def validate_csv(raw: bytes, *, max_rows: int, max_features: int) -> ValidatedDataset:
    """A header row with a ``label`` column; every other column is a numeric feature."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DatasetError("the CSV is not UTF-8 text") from exc
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if not header:
        raise DatasetError("the CSV is empty; it needs a header row")
    header = [h.strip() for h in header]
    if LABEL_COLUMN not in header:
        raise DatasetError(f"the CSV header has no '{LABEL_COLUMN}' column", field="label")
    if len(header) - 1 > max_features:
        raise DatasetError(f"too many feature columns ({len(header) - 1} > {max_features})")
    label_index = header.index(LABEL_COLUMN)
    features: list[list[float]] = []
    labels: list[float] = []
    for line_number, row in enumerate(reader, start=2):
        if not row:
            continue
        if len(row) != len(header):
            raise DatasetError(
                f"line {line_number} has {len(row)} columns, the header has {len(header)}"
            )
        if len(features) >= max_rows:
            raise DatasetError(f"the CSV has more than {max_rows} rows")
        try:
            values = [float(v) for v in row]
        except ValueError as exc:
            raise DatasetError(f"line {line_number}: {exc}") from exc
        for column, value in zip(header, values, strict=True):
            # float("1e400") is inf: refuse it here, before a cast makes it int64 min.
            if not math.isfinite(value):
                raise DatasetError(
                    f"line {line_number}, column {column!r}: {value} is not a finite number "
                    "(NaN and infinities are refused)",
                    field=LABEL_COLUMN if column == LABEL_COLUMN else "file",
                )
        labels.append(values.pop(label_index))
        features.append(values)
    if not features:
        raise DatasetError("the CSV has a header but no rows")
    data = np.asarray(features, dtype=np.float32)
    label_array = np.asarray(labels)
    if np.all(label_array == np.round(label_array)):
        label_array = label_array.astype(np.int64)
    else:
        label_array = label_array.astype(np.float32)
    _check_arrays(data, label_array, max_rows=max_rows, max_features=max_features)
    return _result("csv", data, label_array, _to_npz(data, label_array))


def validate_upload(
    filename: str, raw: bytes, *, max_rows: int, max_features: int
) -> ValidatedDataset:
    """Pick the validator from the file name (``.npz`` or ``.csv``)."""
    lowered = filename.lower()
    if lowered.endswith(".npz"):
        return validate_npz(raw, max_rows=max_rows, max_features=max_features)
    if lowered.endswith(".csv"):
        return validate_csv(raw, max_rows=max_rows, max_features=max_features)
    raise DatasetError("unsupported file type; upload a .npz or a .csv", field="file")
