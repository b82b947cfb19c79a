"""A job's data splits -> engine DataLoaders.

Tables (the sklearn built-ins, npz and CSV uploads) load as arrays, as before. Image sets
(the synthetic ``mnist``/``cifar10`` built-ins, RecordIO and image-folder uploads) are read
record by record from local files through ``gluon.data.vision`` with the spec's
``transforms``: uploads are streamed from object storage once into a local cache
(:class:`DatasetCache`), so a set larger than the worker's memory trains from disk.
``normalize: auto`` appends ``Normalize`` with the training set's mean/std from its stats.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import engine.gluon.data
import engine.random
from core import transform_spec
from core.jobspec import IMAGE_BUILTINS, BuiltinSource, DatasetSource
from core.storage import ObjectStore
from engine.context import cpu
from engine.gluon.data.vision import datasets as vision_datasets
from engine.gluon.data.vision import transforms as vision_transforms
from engine.ndarray.creation import array
from workers.datasets.archive import class_and_name, members
from workers.shards import ImageShardLoader
from workers.synthetic_data import synthetic_root


class DataSourceError(ValueError):
    """A data source the worker cannot load; the job fails with this reason."""


@dataclass(frozen=True)
class StoredDataset:
    """What the worker needs of a data set row (read by the caller, in its session)."""

    id: str
    format: str
    files: list[dict[str, Any]]
    stats: dict[str, Any] | None


class DatasetCache:
    """Data set files on local disk, fetched once from object storage (streamed, never
    whole in memory) and reused by later jobs; the least recently used sets are dropped
    when the cache outgrows ``max_bytes``."""

    def __init__(self, root: Path, store: ObjectStore, max_bytes: int = 50 * 1024**3):
        self.root = root
        self.store = store
        self.max_bytes = max_bytes

    def folder(self, dataset: StoredDataset) -> Path:
        folder = self.root / "datasets" / dataset.id
        if folder.is_dir():
            os.utime(folder)  # recently used
            return folder
        self._make_room(sum(int(f["size"]) for f in dataset.files))
        folder.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".fetch-"))
        try:
            for stored in dataset.files:
                target = scratch / _local_name(dataset.format, str(stored["path"]))
                with open(target, "wb") as handle:
                    for chunk in self.store.stream(str(stored["key"])):
                        handle.write(chunk)
            if dataset.format == "archive":
                _extract_images(next(scratch.iterdir()), scratch / "images")
            os.rename(scratch, folder)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            if not folder.is_dir():
                raise
        return folder

    def _make_room(self, needed: int) -> None:
        base = self.root / "datasets"
        if not base.is_dir():
            return
        folders = sorted((p for p in base.iterdir() if not p.name.startswith(".")),
                         key=lambda p: p.stat().st_mtime)
        used = sum(f.stat().st_size for p in folders for f in p.rglob("*") if f.is_file())
        while folders and used + needed > self.max_bytes:
            oldest = folders.pop(0)
            used -= sum(f.stat().st_size for f in oldest.rglob("*") if f.is_file())
            shutil.rmtree(oldest, ignore_errors=True)


def _local_name(fmt: str, path: str) -> str:
    # RecordIO reads the .idx beside the .rec by stem: give the pair one stem.
    suffix = Path(path).suffix.lower()
    return f"data{suffix}" if fmt == "recordio" else f"upload{suffix}"


def _extract_images(archive: Path, target: Path) -> None:
    """Write an archive's images as ``target/<class>/<file>``, through the validation's
    member checks (names were refused at validation if they escaped; checked again)."""
    for name, _, data in members(archive):
        located = class_and_name(name)
        if located is None or located == ("", "") or data is None:
            continue
        class_name, file_name = located
        (target / class_name).mkdir(parents=True, exist_ok=True)
        (target / class_name / file_name).write_bytes(data)
    archive.unlink()


def build_transforms(specs: list[Any] | None, normalize: tuple[list[float], list[float]] | None
                     ) -> Any:
    """The spec's transforms, with ToTensor added if absent (the network takes CHW
    floats), then the automatic Normalize if asked for and none was given."""
    blocks = []
    names = [spec.type for spec in specs or []]
    for spec in specs or []:
        params = spec.model_dump(exclude={"type"})
        if isinstance(spec, transform_spec.RandomBrightness | transform_spec.RandomContrast
                      | transform_spec.RandomSaturation | transform_spec.RandomHue):
            # MXNet names the amount after the transform (brightness=...); the engine's
            # constructors share one ``amount``.
            params = {"amount": next(iter(params.values()))}
        blocks.append(vision_transforms.create(spec.type, **params))
    if "ToTensor" not in names:
        # Before Normalize, which works on CHW tensors, as in MXNet; else last.
        at = names.index("Normalize") if "Normalize" in names else len(blocks)
        blocks.insert(at, vision_transforms.ToTensor())
    if normalize is not None and "Normalize" not in names:
        blocks.append(vision_transforms.Normalize(*normalize))
    return vision_transforms.Compose(blocks)


def normalize_from_stats(stats: dict[str, Any] | None) -> tuple[list[float], list[float]] | None:
    if not stats or not stats.get("mean"):
        return None
    return list(stats["mean"]), [max(float(s), 1e-6) for s in stats["std"]]


def image_dataset(
    source: BuiltinSource | DatasetSource, cache: DatasetCache,
    lookup: Callable[[str], StoredDataset],
) -> tuple[Any, dict[str, Any] | None]:
    """(an engine Dataset of (HWC image, label), the stats to normalise with)."""
    if isinstance(source, BuiltinSource):
        root = str(synthetic_root(source.builtin, cache.root))
        train = source.split == "train"
        if source.builtin == "mnist":
            return vision_datasets.MNIST(root=root, train=train), None
        return vision_datasets.CIFAR10(root=root, train=train), None
    stored = lookup(source.dataset)
    folder = cache.folder(stored)
    if stored.format == "recordio":
        return vision_datasets.ImageRecordDataset(str(folder / "data.rec")), stored.stats
    if stored.format == "archive":
        return vision_datasets.ImageFolderDataset(str(folder / "images")), stored.stats
    raise DataSourceError(f"dataset {stored.id} is {stored.format}, not images")


def is_image_source(source: Any, lookup: Callable[[str], StoredDataset]) -> bool:
    if isinstance(source, BuiltinSource):
        return source.builtin in IMAGE_BUILTINS
    return isinstance(source, DatasetSource) and lookup(source.dataset).format in (
        "recordio", "archive")


def image_loader(
    dataset: Any, transforms: Any, *, batch_size: int, shuffle: bool, seed: int
) -> Any:
    return engine.gluon.data.DataLoader(
        dataset.transform_first(transforms), batch_size=batch_size, shuffle=shuffle,
        last_batch="keep", seed=seed,
    )


def image_stats(dataset: Any, limit: int = 2000) -> dict[str, Any]:
    """Per-channel mean/std (0-1) of a built-in image set, from its first images."""
    pixels = np.stack([np.asarray(dataset[i][0].asnumpy(), np.float64)
                       for i in range(min(limit, len(dataset)))]) / 255.0
    flat = pixels.reshape(-1, pixels.shape[-1])
    return {"mean": list(flat.mean(axis=0)), "std": list(flat.std(axis=0))}



@dataclass
class ImageSplits:
    train: Any  # one worker's loader (rank 0 of 1: workers.shards.ImageShardLoader)
    val: Any | None
    sample: Any  # one transformed training input, batched: materialises the net's shapes
    train_set: Any  # the training Dataset of (HWC image, label), untransformed
    train_transforms: Any  # what ``train`` applies to each training image
    random_transforms: bool  # whether they draw random numbers


def image_splits(data: Any, cache: DatasetCache, lookup: Callable[[str], StoredDataset],
                 *, seed: int) -> ImageSplits:
    """Loaders for image splits; ``normalize: auto`` uses the training set's statistics
    for both splits (as one normalises validation data with the training mean/std)."""
    train_set, stats = image_dataset(data.train, cache, lookup)
    if data.normalize == "auto" and stats is None:
        stats = image_stats(train_set)
    normalize = normalize_from_stats(stats) if data.normalize == "auto" else None
    train_transforms = build_transforms(data.train.transforms, normalize)
    random_transforms = any(t.type.startswith("Random") for t in data.train.transforms or [])
    # Each sample's random draws come from (seed, epoch, index), as on every rank of a
    # distributed job, so N ranks see the images one worker sees (workers/shards.py).
    train = ImageShardLoader(train_set, train_transforms, global_batch=data.batch_size,
                             rank=0, size=1, shuffle=data.shuffle, seed=seed, ctx=cpu(),
                             random_transforms=random_transforms)
    val = None
    if data.val is not None:
        val_set, _ = image_dataset(data.val, cache, lookup)
        val = image_loader(val_set, build_transforms(data.val.transforms, normalize),
                           batch_size=data.batch_size, shuffle=False, seed=seed)
    # Drawing the sample must not move the random state the training run starts from.
    state = engine.random.get_state()
    sample = train_set.transform_first(train_transforms)[0][0]
    engine.random.set_state(state)
    return ImageSplits(train, val, array(sample.asnumpy()[None]), train_set, train_transforms,
                       random_transforms)
