"""The built-in image sets ``mnist`` and ``cifar10``: synthetic, generated here (no
download), written in the standard files of MNIST (IDX) and CIFAR-10 (binary batches) so
the engine's ``vision.MNIST`` / ``vision.CIFAR10`` read them as they read the real ones.

Each image is low noise plus a bright block whose position (and, for cifar10, colour)
is set by the class, jittered by a pixel or two: a small CNN learns it in an epoch or
two, which is what tests and examples need. Deterministic: the same files everywhere.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

SIZES = {"mnist": {"train": 6000, "test": 1000}, "cifar10": {"train": 5000, "test": 1000}}
SHAPES = {"mnist": (28, 28, 1), "cifar10": (32, 32, 3)}
CLASSES = 10
_BLOCK = 5


def synthetic_images(kind: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(N, H, W, C) uint8 images and int32 labels of one split (``train`` or ``test``)."""
    height, width, channels = SHAPES[kind]
    count = SIZES[kind][split]
    rng = np.random.default_rng([sorted(SHAPES).index(kind), split == "train"])
    labels = rng.integers(0, CLASSES, count).astype(np.int32)
    images = rng.integers(0, 60, size=(count, height, width, channels), dtype=np.uint8)
    col_step = (width - _BLOCK - 3) // 4
    row_step = (height - _BLOCK - 3) // 2 + 1
    jitter = rng.integers(0, 3, size=(count, 2))
    colours = np.array([[255, 80 + 17 * k, 255 - 20 * k] for k in range(CLASSES)], np.uint8)
    for i, label in enumerate(labels):
        row = 1 + (label // 5) * row_step + jitter[i, 0]
        col = 1 + (label % 5) * col_step + jitter[i, 1]
        images[i, row:row + _BLOCK, col:col + _BLOCK, :] = colours[label, :channels]
    return images, labels


def _write_mnist(folder: Path) -> None:
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images, labels = synthetic_images("mnist", split)
        count, height, width, _ = images.shape
        header = np.array([2051, count, height, width], ">u4").tobytes()
        (folder / f"{prefix}-images-idx3-ubyte").write_bytes(header + images.tobytes())
        header = np.array([2049, count], ">u4").tobytes()
        (folder / f"{prefix}-labels-idx1-ubyte").write_bytes(
            header + labels.astype(np.uint8).tobytes()
        )


def _write_cifar10(folder: Path) -> None:
    for split in ("train", "test"):
        images, labels = synthetic_images("cifar10", split)
        # Each record: the label byte, then the R, G and B planes (32x32 each).
        rows = np.concatenate(
            [labels.astype(np.uint8)[:, None],
             images.transpose(0, 3, 1, 2).reshape(len(labels), -1)], axis=1
        )
        if split == "test":
            (folder / "test_batch.bin").write_bytes(rows.tobytes())
            continue
        for index, batch in enumerate(np.array_split(rows, 5), start=1):
            (folder / f"data_batch_{index}.bin").write_bytes(batch.tobytes())


def synthetic_root(kind: str, cache: Path) -> Path:
    """The folder holding ``kind``'s files, generated on first use (atomically: a worker
    killed mid-write leaves no half set behind)."""
    root = cache / "builtin" / kind
    if root.is_dir():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{kind}-"))
    (_write_mnist if kind == "mnist" else _write_cifar10)(scratch)
    try:
        os.rename(scratch, root)
    except OSError:  # another process won the race; its copy is identical
        for path in scratch.iterdir():
            path.unlink()
        scratch.rmdir()
    return root
