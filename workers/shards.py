"""A rank's part of every global batch: arrays (:class:`ShardLoader`) and images
(:class:`ImageShardLoader`), both on one plan (:class:`ShardPlan`). A single worker is
rank 0 of 1 (its image loader is an :class:`ImageShardLoader` too).

``data.batch_size`` is the global batch: batch ``k`` of an epoch is positions
``[kB, (k+1)B)`` of the shuffled order (a function of (seed, epoch) alone, the one a single
worker's loader uses), and rank ``r`` of ``N`` takes the positions ``kB + r, kB + r + N,
...``, so the plan depends on (seed, epoch, N) only and N ranks together train exactly the
batches one worker would. A last partial batch smaller than N is left out (and any partial
batch when ``keep_partial`` is false).

An image rank decodes and transforms only its own samples. Random transforms draw from a
generator seeded by (seed, epoch, sample index), not from the process's stream: a sample's
augmentation is the same whichever rank reads it, in whichever order, and a resumed run
redraws exactly what the uninterrupted one drew; the batches before its place in the
epoch are not even read (:meth:`ShardPlan.iter_from`), and the engine's own stream, which
rank 0's checkpoints hold for every rank, is left where it was. One worker reads its
images the same way, so N ranks train on exactly the images, augmentations included,
that one worker does.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np

import engine.random
from engine.gluon.data.dataloader import default_batchify_fn
from engine.ndarray.creation import array


class ShardPlan:
    """Which of ``count`` samples rank ``rank`` of ``size`` reads, batch by batch."""

    def __init__(self, count: int, *, global_batch: int, rank: int, size: int,
                 shuffle: bool, seed: int, keep_partial: bool = True) -> None:
        self.count = count
        self.global_batch, self.rank, self.size = global_batch, rank, size
        self.shuffle, self.seed = shuffle, seed
        self.epoch = 0
        full, rest = divmod(count, global_batch)
        keep = keep_partial and rest >= size
        self.global_sizes = [global_batch] * full + ([rest] if keep else [])

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def plan(self, epoch: int) -> list[np.ndarray]:
        """This rank's sample indices, batch by batch, in ``epoch``."""
        batch = self.global_batch
        order = (np.random.default_rng([int(self.seed), int(epoch)]).permutation(self.count)
                 if self.shuffle else np.arange(self.count))
        return [order[k * batch + self.rank:k * batch + size:self.size]
                for k, size in enumerate(self.global_sizes)]

    def __len__(self) -> int:
        return len(self.global_sizes)

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        return self.iter_from(0)

    def iter_from(self, start: int) -> Iterator[tuple[Any, Any]]:
        """The epoch's batches from its batch ``start`` on; the ones before it are not
        read (a resumed run's place in its epoch)."""
        raise NotImplementedError

    def step_size(self, index: int) -> int:
        """The global batch's size: what the update of the epoch's batch ``index``
        normalises by."""
        return self.global_sizes[index]


class ShardLoader(ShardPlan):
    """Rank ``rank`` of ``size``'s part of every global batch of arrays.

    >>> loader = ShardLoader(np.arange(10.0)[:, None], np.arange(10.0), global_batch=4,
    ...                      rank=1, size=2, shuffle=False, seed=0, ctx=engine.cpu())
    >>> [b.asnumpy().ravel().tolist() for b, _ in loader]
    [[1.0, 3.0], [5.0, 7.0], [9.0]]
    """

    def __init__(self, data: np.ndarray, label: np.ndarray, *, global_batch: int, rank: int,
                 size: int, shuffle: bool, seed: int, ctx: Any,
                 keep_partial: bool = True) -> None:
        super().__init__(len(data), global_batch=global_batch, rank=rank, size=size,
                         shuffle=shuffle, seed=seed, keep_partial=keep_partial)
        self.data, self.label, self.ctx = data, label, ctx

    def iter_from(self, start: int) -> Iterator[tuple[Any, Any]]:
        for indices in self.plan(self.epoch)[start:]:
            yield (array(self.data[indices], ctx=self.ctx),
                   array(self.label[indices], ctx=self.ctx))


class ImageShardLoader(ShardPlan):
    """Rank ``rank`` of ``size``'s part of every global batch of an image Dataset of
    (HWC image, label), each image through ``transforms`` (see the module docstring)."""

    def __init__(self, dataset: Any, transforms: Any, *, global_batch: int, rank: int,
                 size: int, shuffle: bool, seed: int, ctx: Any, keep_partial: bool = True,
                 random_transforms: bool = True) -> None:
        super().__init__(len(dataset), global_batch=global_batch, rank=rank, size=size,
                         shuffle=shuffle, seed=seed, keep_partial=keep_partial)
        self.dataset, self.transforms, self.ctx = dataset, transforms, ctx
        self.random_transforms = random_transforms  # False: no per-sample seeding needed

    def iter_from(self, start: int) -> Iterator[tuple[Any, Any]]:
        for indices in self.plan(self.epoch)[start:]:
            data, label = default_batchify_fn(self.samples(self.epoch, indices))
            yield data.as_in_context(self.ctx), label.as_in_context(self.ctx)

    def samples(self, epoch: int, indices: np.ndarray) -> list[tuple[Any, Any]]:
        """The (transformed image, label) of each index, each drawn on its own stream."""
        if not self.random_transforms:
            return [(self.transforms(image), label)
                    for image, label in (self.dataset[i] for i in indices.tolist())]
        # The transforms draw from engine.random's generator: point it at the sample's
        # stream, then back at the process's, where it was.
        bits = engine.random.generator().bit_generator
        saved = bits.state
        try:
            out = []
            for index in indices.tolist():
                bits.state = sample_random_state(self.seed, epoch, index)
                image, label = self.dataset[index]
                out.append((self.transforms(image), label))
            return out
        finally:
            bits.state = saved


def sample_random_state(seed: int, epoch: int, index: int) -> dict[str, Any]:
    """The PCG64 state a sample's random transforms start from: a hash of (seed, epoch,
    index) as its 128-bit state and (odd) increment, a few microseconds a sample (numpy's
    SeedSequence takes ten times as long, as much as decoding a small image)."""
    key = struct.pack("<QQQ", int(seed) % 2**64, int(epoch), int(index))
    digest = hashlib.blake2b(key, digest_size=32, person=b"rudder-sample").digest()
    return {"bit_generator": "PCG64", "has_uint32": 0, "uinteger": 0,
            "state": {"state": int.from_bytes(digest[:16], "little"),
                      "inc": int.from_bytes(digest[16:], "little") | 1}}
