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

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Per-feature statistics of wider tables would be noise in an API answer.
MAX_STAT_CHANNELS = 1024
MAX_SIZE_BUCKETS = 20


# Distinct labels counted per set; past this the labels are a regression target, not
# classes, and ``class_counts`` is left empty (a map of millions would be noise and memory).
MAX_COUNTED_LABELS = 65_536


def stats_axis(shape: tuple[int, ...]) -> int | None:
    """The channel axis the stats are taken over: axis 1 of NCHW (1, 3 or 4 channels), the
    last axis of NHWC, the features of a table; None for one statistic over everything."""
    if len(shape) == 4:
        return 1 if shape[1] in (1, 3, 4) else 3
    return 1 if len(shape) == 2 else None


def _image_sizes(shape: tuple[int, ...]) -> dict[str, int] | None:
    if len(shape) == 4:
        spatial = shape[2:] if stats_axis(shape) == 1 else shape[1:3]
        return {f"{spatial[0]}x{spatial[1]}": int(shape[0])}
    if len(shape) == 3:
        return {f"{shape[1]}x{shape[2]}": int(shape[0])}
    return None


class ChannelMoments:
    """Per-channel count, mean and sum of squared deviations of an array read in flat
    blocks of its elements (C or Fortran order), merged block by block (Chan et al.), so
    a set of any size is summarised in memory proportional to one block."""

    def __init__(self, shape: tuple[int, ...], *, fortran_order: bool = False):
        axis = stats_axis(shape)
        self.channels = 1 if axis is None else int(shape[axis])
        self.enabled = self.channels <= MAX_STAT_CHANNELS
        # Element i of the flat array belongs to channel (i // stride) % channels.
        if axis is None:
            self._stride = max(1, math.prod(shape))
        elif fortran_order:
            self._stride = math.prod(shape[:axis])
        else:
            self._stride = math.prod(shape[axis + 1:])
        self._count = np.zeros(self.channels)
        self._mean = np.zeros(self.channels)
        self._m2 = np.zeros(self.channels)
        self._seen = 0

    def add(self, block: np.ndarray) -> None:
        """The next ``block.size`` elements of the flat array, in its order."""
        if not self.enabled or block.size == 0:
            self._seen += block.size
            return
        values = block.reshape(-1).astype(np.float64)
        if self.channels == 1:
            ids = np.zeros(values.size, dtype=np.intp)
        else:
            ids = (np.arange(self._seen, self._seen + values.size) // self._stride
                   ) % self.channels
        self._seen += values.size
        # Deviations from the running mean keep the sums small (no cancellation when the
        # values sit far from zero).
        shifted = values - self._mean[ids]
        count = np.bincount(ids, minlength=self.channels).astype(np.float64)
        total = np.bincount(ids, weights=shifted, minlength=self.channels)
        squares = np.bincount(ids, weights=shifted * shifted, minlength=self.channels)
        present = count > 0
        block_mean = np.where(present, total / np.maximum(count, 1), 0.0)
        block_m2 = squares - block_mean * total
        merged = self._count + count
        ratio = np.where(present, count / np.maximum(merged, 1), 0.0)
        self._m2 += block_m2 + block_mean * block_mean * self._count * ratio
        self._mean += block_mean * ratio
        self._count = merged

    def mean_std(self) -> tuple[list[float], list[float]] | None:
        if not self.enabled or not self._count.all():
            return None
        std = np.sqrt(np.maximum(self._m2 / self._count, 0.0))
        return [float(v) for v in self._mean], [float(v) for v in std]


class LabelTally:
    """What a set's labels say, read in blocks: range, whether all are whole numbers, and
    how often each occurs (up to MAX_COUNTED_LABELS distinct values)."""

    def __init__(self) -> None:
        self.minimum = math.inf
        self.maximum = -math.inf
        self.integral = True
        self.counts: Counter[float] | None = Counter()

    def add(self, block: np.ndarray) -> None:
        if block.size == 0:
            return
        self.minimum = min(self.minimum, float(block.min()))
        self.maximum = max(self.maximum, float(block.max()))
        if block.dtype.kind == "f":
            self.integral = self.integral and bool(np.all(block == np.round(block)))
        if self.counts is not None:
            values, counts = np.unique(block, return_counts=True)
            for value, count in zip(values.tolist(), counts.tolist(), strict=True):
                self.counts[value] += count
            if len(self.counts) > MAX_COUNTED_LABELS:
                self.counts = None

    def class_counts(self) -> dict[str, int]:
        """``{"0": n, ...}`` for whole-number labels (the caller knows they are 1-D)."""
        if self.counts is None or not self.integral:
            return {}
        return {str(int(v)): int(c) for v, c in sorted(self.counts.items())}

    def num_classes(self, label_kind: str) -> int | None:
        """max + 1 for non-negative integer labels (what the loader will use)."""
        if label_kind not in "iu" or self.minimum < 0 or self.maximum == -math.inf:
            return None
        return int(self.maximum) + 1


def summarise(shape: tuple[int, ...], moments: ChannelMoments, labels: LabelTally, *,
              label_kind: str, label_ndim: int) -> dict[str, Any]:
    """The stats object of an npz/CSV set (module docstring)."""
    counts = labels.class_counts() if label_ndim == 1 and label_kind in "iu" else {}
    stats: dict[str, Any] = {
        "records": int(shape[0]), "classes": len(counts) or None,
        "class_counts": counts, "image_sizes": _image_sizes(shape), "channels": None,
        "mean": None, "std": None, "scale": "raw",
    }
    moments_found = moments.mean_std()
    if moments_found is not None:
        stats["channels"] = moments.channels
        stats["mean"], stats["std"] = moments_found
    return stats


def array_stats(data: np.ndarray, label: np.ndarray) -> dict[str, Any]:
    """Stats of arrays already in memory (see :func:`summarise`)."""
    moments = ChannelMoments(data.shape)
    moments.add(np.ascontiguousarray(data))
    labels = LabelTally()
    labels.add(label)
    return summarise(data.shape, moments, labels, label_kind=label.dtype.kind,
                     label_ndim=label.ndim)


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
