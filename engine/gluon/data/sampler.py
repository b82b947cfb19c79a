"""Samplers: the order in which a DataLoader visits a dataset.

With a ``seed``, ``RandomSampler`` draws epoch ``e``'s permutation from
``numpy.random.default_rng([seed, e])``: the order is a pure function of (seed, epoch), so
a job resumed mid-epoch sees exactly the same batches. Without a seed it uses
:func:`engine.random.generator` (reproducible under ``engine.random.seed``).

>>> list(SequentialSampler(3))
[0, 1, 2]
>>> s = RandomSampler(5, seed=7); s.set_epoch(2); a = list(s); s.set_epoch(2); a == list(s)
True
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy

from ... import random as _random

_LAST_BATCH = ("keep", "discard", "rollover")


class Sampler:
    """Base class: iterate over indices."""

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose order the next iteration yields (seeded samplers)."""


class SequentialSampler(Sampler):
    """``start, start+1, ..., start+length-1``."""

    def __init__(self, length: int, start: int = 0) -> None:
        self._length = length
        self._start = start

    def __iter__(self) -> Iterator[int]:
        return iter(range(self._start, self._start + self._length))

    def __len__(self) -> int:
        return self._length


class RandomSampler(Sampler):
    """A random permutation of ``range(length)`` each epoch."""

    def __init__(self, length: int, seed: int | None = None) -> None:
        self._length = length
        self._seed = seed
        self._epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self._epoch = int(epoch)

    def permutation(self, epoch: int | None = None) -> numpy.ndarray:
        """The order for ``epoch`` (seeded), or a fresh draw from the engine generator."""
        if self._seed is None:
            return _random.generator(numpy).permutation(self._length)
        e = self._epoch if epoch is None else epoch
        return numpy.random.default_rng([int(self._seed), int(e)]).permutation(self._length)

    def __iter__(self) -> Iterator[int]:
        order = self.permutation()
        self._epoch += 1  # the next iteration is the next epoch unless set_epoch says otherwise
        return iter(order.tolist())

    def __len__(self) -> int:
        return self._length


class BatchSampler(Sampler):
    """Groups a sampler's indices into lists of ``batch_size``.

    ``last_batch``: 'keep' yields a short last batch, 'discard' drops it, 'rollover'
    carries its indices into the start of the next epoch.
    """

    def __init__(self, sampler: Sampler, batch_size: int, last_batch: str = "keep") -> None:
        if last_batch not in _LAST_BATCH:
            raise ValueError(
                f"last_batch must be one of 'keep', 'discard', or 'rollover', but got {last_batch}"
            )
        if int(batch_size) <= 0:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
        self._sampler = sampler
        self._batch_size = int(batch_size)
        self._last_batch = last_batch
        self._prev: list[int] = []
        self._epoch: int | None = None

    def set_epoch(self, epoch: int) -> None:
        self._sampler.set_epoch(epoch)
        self._epoch = int(epoch)
        if self._last_batch == "rollover" and isinstance(self._sampler, RandomSampler) \
                and self._sampler._seed is not None:
            self._prev = self._rollover_carry(epoch)

    def _rollover_carry(self, epoch: int) -> list[int]:
        """Indices carried into ``epoch``: the tail of the stream of all earlier epochs that
        did not fill a batch (a pure function of seed and epoch)."""
        n, bs = len(self._sampler), self._batch_size
        carried = (epoch * n) % bs
        tail: list[int] = []
        e = epoch - 1
        while len(tail) < carried and e >= 0:
            tail = self._sampler.permutation(e).tolist() + tail  # type: ignore[attr-defined]
            e -= 1
        return tail[len(tail) - carried:] if carried else []

    def __iter__(self) -> Iterator[list[int]]:
        batch, self._prev = self._prev, []
        for index in self._sampler:
            batch.append(int(index))
            if len(batch) == self._batch_size:
                yield batch
                batch = []
        if batch:
            if self._last_batch == "keep":
                yield batch
            elif self._last_batch == "rollover":
                self._prev = batch

    def __len__(self) -> int:
        n = len(self._sampler)
        if self._last_batch == "keep":
            return (n + self._batch_size - 1) // self._batch_size
        if self._last_batch == "discard":
            return n // self._batch_size
        return (len(self._prev) + n) // self._batch_size


class FilterSampler(Sampler):
    """Indices ``i`` of ``dataset`` for which ``fn(dataset[i])`` is true."""

    def __init__(self, fn: Any, dataset: Any) -> None:
        self._indices = [i for i in range(len(dataset)) if fn(dataset[i])]

    def __iter__(self) -> Iterator[int]:
        return iter(self._indices)

    def __len__(self) -> int:
        return len(self._indices)
