"""What validation computes about a data set, shown by ``GET /v1/datasets/{id}`` and
read by ``normalize: auto``: record count, classes, image sizes, per-channel mean/std.

The stats are a JSON object (``Dataset.stats``)::

    {"records": 60000, "classes": 10, "class_counts": {"0": 5923, ...},
     "image_sizes": {"28x28": 60000} | null, "channels": 1 | null,
     "mean": [0.1307], "std": [0.3081], "scale": "0-1" | "raw"}

``scale`` says what the mean/std are measured on: "0-1" for decoded images (pixel / 255,
what ToTensor gives), "raw" for numeric arrays and CSV features.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Per-feature statistics of wider tables would be noise in an API answer.
MAX_STAT_CHANNELS = 1024
MAX_SIZE_BUCKETS = 20


def _label_counts(label: np.ndarray) -> dict[str, int]:
    if label.ndim != 1 or label.dtype.kind not in "iu":
        return {}
    values, counts = np.unique(label, return_counts=True)
    return {str(int(v)): int(c) for v, c in zip(values, counts, strict=True)}


def array_stats(data: np.ndarray, label: np.ndarray) -> dict[str, Any]:
    """Stats of an npz/CSV set: channels are axis 1 of NCHW (1, 3 or 4 channels), the last
    axis of NHWC, or the features of a table."""
    counts = _label_counts(label)
    stats: dict[str, Any] = {
        "records": int(data.shape[0]), "classes": len(counts) or None,
        "class_counts": counts, "image_sizes": None, "channels": None,
        "mean": None, "std": None, "scale": "raw",
    }
    if data.ndim == 4:
        axis = 1 if data.shape[1] in (1, 3, 4) else 3
        spatial = data.shape[2:] if axis == 1 else data.shape[1:3]
        stats["image_sizes"] = {f"{spatial[0]}x{spatial[1]}": int(data.shape[0])}
    elif data.ndim == 3:
        axis = -1
        stats["image_sizes"] = {f"{data.shape[1]}x{data.shape[2]}": int(data.shape[0])}
    elif data.ndim == 2:
        axis = 1
    else:
        axis = -1
    if axis == -1:
        flat = data.reshape(1, -1).astype(np.float64)
    else:
        flat = np.moveaxis(data, axis, 0).reshape(data.shape[axis], -1).astype(np.float64)
    if flat.shape[0] <= MAX_STAT_CHANNELS:
        stats["channels"] = int(flat.shape[0])
        stats["mean"] = [float(v) for v in flat.mean(axis=1)]
        stats["std"] = [float(v) for v in flat.std(axis=1)]
    return stats


@dataclass
class ImageStatsAccumulator:
    """Streaming stats over decoded images (HxWxC uint8), one image at a time, so a set
    larger than memory is summarised in one pass."""

    channels: int | None = None
    records: int = 0
    sizes: Counter[str] = field(default_factory=Counter)
    labels: Counter[str] = field(default_factory=Counter)
    _sum: np.ndarray | None = None
    _sum_sq: np.ndarray | None = None
    _pixels: int = 0

    def add(self, image: np.ndarray, label: float | str) -> None:
        """Count one image; ``label`` is a number (RecordIO) or a class name (folders)."""
        if image.ndim == 2:
            image = image[:, :, None]
        if self.channels is None:
            self.channels = int(image.shape[2])
            self._sum = np.zeros(self.channels)
            self._sum_sq = np.zeros(self.channels)
        if image.shape[2] != self.channels:
            raise ValueError(
                f"image {self.records} has {image.shape[2]} channels, the first had "
                f"{self.channels}"
            )
        assert self._sum is not None and self._sum_sq is not None
        pixels = image.reshape(-1, self.channels).astype(np.float64) / 255.0
        self._sum += pixels.sum(axis=0)
        self._sum_sq += np.square(pixels).sum(axis=0)
        self._pixels += pixels.shape[0]
        self.sizes[f"{image.shape[0]}x{image.shape[1]}"] += 1
        if isinstance(label, float) and label.is_integer():
            label = int(label)
        self.labels[str(label)] += 1
        self.records += 1

    def result(self) -> dict[str, Any]:
        mean = std = None
        if self._sum is not None and self._sum_sq is not None and self._pixels:
            mean_array = self._sum / self._pixels
            var = np.maximum(self._sum_sq / self._pixels - np.square(mean_array), 0.0)
            mean = [float(v) for v in mean_array]
            std = [float(v) for v in np.sqrt(var)]
        return {
            "records": self.records, "classes": len(self.labels) or None,
            "class_counts": dict(sorted(self.labels.items())),
            "image_sizes": dict(self.sizes.most_common(MAX_SIZE_BUCKETS)),
            "channels": self.channels, "mean": mean, "std": std, "scale": "0-1",
        }
