"""Which samples a rank reads: a disjoint part of one shuffled order shared by all ranks.

The order depends on (seed, epoch) only, so every rank computes the same permutation
without talking to the others, and rank r takes every N-th sample starting at r. The
parts differ in size by at most one sample; pass ``drop_last=True`` to cut them all to
the shortest (every rank then runs the same number of steps, which a synchronous job
needs when the last batch is not padded).

>>> shard(10, rank=1, num_ranks=3, seed=7, epoch=0).tolist()
[0, 3, 4]
"""

from __future__ import annotations

import numpy


def shard(num_samples: int, rank: int, num_ranks: int, seed: int = 0, epoch: int = 0,
          shuffle: bool = True, drop_last: bool = False) -> numpy.ndarray:
    """Sample indices for ``rank`` of ``num_ranks`` in ``epoch`` (int64 array)."""
    if num_ranks < 1 or not 0 <= rank < num_ranks:
        raise ValueError(f"rank {rank} is outside 0..{num_ranks - 1}")
    if num_samples < 0:
        raise ValueError(f"num_samples must be >= 0, got {num_samples}")
    if shuffle:
        order = numpy.random.default_rng([int(seed), int(epoch)]).permutation(num_samples)
    else:
        order = numpy.arange(num_samples)
    part = order[rank::num_ranks]
    if drop_last:
        part = part[:num_samples // num_ranks]
    return part.astype(numpy.int64)
