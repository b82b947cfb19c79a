"""What every npz/CSV check shares: the error it raises, the summary it returns, the
limits on shapes and types (checked on the arrays' headers, before any data is read)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

LABEL_COLUMN = "label"
# Validation reads and writes arrays in blocks of about this many bytes, so its memory
# does not grow with the data set (a few blocks are alive at once).
BLOCK_BYTES = 256 * 1024


class DatasetError(ValueError):
    """An upload that cannot be accepted; ``field`` names what is wrong."""

    def __init__(self, message: str, *, field: str = "file"):
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class DatasetSummary:
    """What validation found: the row's columns and its stats (core.dataset_stats)."""

    format: str
    num_rows: int
    feature_shape: list[int]
    dtype: str
    num_classes: int | None
    stats: dict[str, Any]


def check_shapes(
    data_dtype: np.dtype, data_shape: tuple[int, ...], label_dtype: np.dtype,
    label_shape: tuple[int, ...], *, max_rows: int, max_features: int,
) -> None:
    """The limits on an npz/CSV set's arrays, by their dtypes and shapes alone."""
    if data_dtype.kind not in "fiu" or data_dtype.itemsize > 8:
        raise DatasetError(f"data must be a numeric array, got dtype {data_dtype}", field="data")
    if label_dtype.kind not in "fiu":
        raise DatasetError(f"label must be numeric, got dtype {label_dtype}", field="label")
    if not 1 <= len(data_shape) <= 5:
        raise DatasetError(f"data must have 1 to 5 dimensions, got {len(data_shape)}",
                           field="data")
    if len(label_shape) not in (1, 2):
        raise DatasetError(f"label must have 1 or 2 dimensions, got {len(label_shape)}",
                           field="label")
    rows = data_shape[0]
    if rows < 1 or rows > max_rows:
        raise DatasetError(f"data must have 1 to {max_rows} rows, got {rows}", field="data")
    if label_shape[0] != rows:
        raise DatasetError(f"label has {label_shape[0]} rows but data has {rows}",
                           field="label")
    features = math.prod(data_shape[1:]) if len(data_shape) > 1 else 1
    if features > max_features:
        raise DatasetError(f"too many features per row ({features} > {max_features})")


def check_finite(name: str, block: np.ndarray) -> None:
    if block.dtype.kind == "f" and not np.isfinite(block).all():
        raise DatasetError(f"{name} contains NaN or infinite values", field=name)
