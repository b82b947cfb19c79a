"""Where the Estimator is in training, for handlers and for resuming (a Rudder addition to
MXNet's Estimator; its handlers keep their own counts, as in MXNet).

>>> p = Progress()
>>> p.start([0] * 4, begin_epoch=1, begin_batch=2)
6
>>> p.begin_epoch_at(1, 2); p.begin_batch_at(2); p.end_batch(8)
>>> p.global_step, p.resume_position
(7, (1, 3))
"""

from __future__ import annotations

from typing import Any


class Progress:
    """``current_epoch``/``current_batch`` (0-based), ``global_step`` (optimizer steps,
    counting batches skipped on resume), ``last_batch_size``, and ``resume_position``."""

    def __init__(self) -> None:
        self.current_epoch = 0
        self.current_batch = 0
        self.global_step = 0
        self.last_batch_size = 0
        self._next_batch = 0
        self._epoch_finished = False

    @property
    def resume_position(self) -> tuple[int, int]:
        """``(begin_epoch, begin_batch)`` for a later ``fit`` that continues from here.

        Inside ``batch_end`` it points after the batch just trained; inside ``epoch_end`` it
        points at the next epoch, or into this one when a handler stopped it early.
        """
        if self._epoch_finished:
            return self.current_epoch + 1, 0
        return self.current_epoch, self._next_batch

    def start(self, data: Any, begin_epoch: int, begin_batch: int) -> int:
        """Reset for a ``fit`` from ``(begin_epoch, begin_batch)``; returns the optimizer
        steps taken before it (when the epoch length is known)."""
        try:
            per_epoch = len(data)
        except TypeError:
            per_epoch = 0
        self.global_step = begin_epoch * per_epoch + begin_batch
        self.current_epoch, self.current_batch = begin_epoch, begin_batch
        return self.global_step

    def begin_epoch_at(self, epoch: int, first_batch: int) -> None:
        self.current_epoch = epoch
        self.current_batch = self._next_batch = first_batch
        self._epoch_finished = False

    def begin_batch_at(self, index: int) -> None:
        self.current_batch = index

    def end_batch(self, batch_size: int) -> None:
        self.global_step += 1
        self._next_batch = self.current_batch + 1
        self.last_batch_size = batch_size

    def end_epoch(self, finished: bool) -> None:
        self._epoch_finished = finished
