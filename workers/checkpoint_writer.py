"""Asynchronous checkpoint writes: snapshot on the training thread, upload on another.

Serialising parameters and trainer state to bytes is fast and must happen at the step
boundary (it *is* the checkpoint); uploading, recording the DB row and pruning old
checkpoints are slow (fsync, S3 round trips) and need not block training — the same
split as PyTorch's async distributed checkpointing. At most one write is in flight: a
new interval checkpoint waits for the previous upload (back-pressure), and the final and
pause checkpoints wait for theirs to finish before the job reports its status.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass
class _Pending:
    work: Callable[[], bool]
    done: threading.Event
    ok: bool = False
    error: BaseException | None = None


class CheckpointWriter:
    """Runs checkpoint uploads one at a time on a daemon thread.

    >>> writer = CheckpointWriter("job-1")                      # doctest: +SKIP
    >>> writer.submit(lambda: upload(snapshot), wait=False)     # doctest: +SKIP
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._current: _Pending | None = None
        self._lock = threading.Lock()

    def submit(self, work: Callable[[], bool], *, wait: bool) -> bool:
        """Start ``work`` after the previous one finished; with ``wait``, return its result
        (re-raising its error), else True once it is queued."""
        self.drain()
        pending = _Pending(work=work, done=threading.Event())
        with self._lock:
            self._current = pending
        threading.Thread(target=self._run, args=(pending,), name=f"checkpoint:{self._name}",
                         daemon=True).start()
        if not wait:
            return True
        pending.done.wait()
        if pending.error is not None:
            raise pending.error
        return pending.ok

    def drain(self) -> None:
        """Wait for the write in flight, if any (its failure was already logged)."""
        with self._lock:
            current = self._current
        if current is not None:
            current.done.wait()

    def _run(self, pending: _Pending) -> None:
        try:
            pending.ok = bool(pending.work())
        except BaseException as exc:  # noqa: BLE001 - surfaced by submit(wait=True) or logged
            pending.error = exc
            log.exception("checkpoint write for %s failed", self._name)
        finally:
            pending.done.set()
