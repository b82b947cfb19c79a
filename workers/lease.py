"""A job lease in Redis with a heartbeat thread: one job never runs twice at once.

The worker that holds the job's lease (core.channel owns the key and its atomic
acquire/renew/release) is the only one allowed to train the job. Renewing and releasing
compare the owner, so a worker whose lease expired (it stalled, or Redis lost the
key) cannot renew or delete a lease another worker now holds. When a renewal fails the
lease is marked lost and :meth:`Lease.held` turns False: the training loop checks it
before every write and stops (fencing).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable

import redis

from core.channel import Channel

log = logging.getLogger(__name__)

# Renewals per TTL: the lease survives RENEWALS_PER_TTL - 1 late or failed heartbeats in a
# row (a loaded CPU, a Redis blip) before another worker may take the job.
RENEWALS_PER_TTL = 4

def holder_identity() -> str:
    """host:pid:random — readable in `redis-cli GET`, unique across restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


class Lease:
    """Exclusive, expiring ownership of one job, kept alive by a daemon heartbeat thread.

    >>> lease = Lease(channel, "42", ttl_seconds=10)  # doctest: +SKIP
    >>> if lease.acquire(): ...  # train while lease.held
    """

    def __init__(
        self,
        channel: Channel,
        job_id: str,
        ttl_seconds: float,
        holder: str | None = None,
    ) -> None:
        if ttl_seconds <= 0:
            raise ValueError("lease ttl must be positive")
        self._channel = channel
        self.job_id = job_id
        self.ttl_ms = max(int(ttl_seconds * 1000), 100)
        self.holder = holder or holder_identity()
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._acquired = False
        self._thread: threading.Thread | None = None
        self._last_renewed = 0.0
        self._on_lost: list[Callable[[], None]] = []

    def when_lost(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (from whichever thread notices) once the lease is lost, so
        the training loop stops at its next step instead of its next check."""
        self._on_lost.append(callback)

    def _mark_lost(self) -> None:
        if self._lost.is_set():
            return
        self._lost.set()
        for callback in self._on_lost:
            callback()

    @property
    def held(self) -> bool:
        """True while this worker owns the job; checked before every write."""
        if not self._acquired or self._lost.is_set():
            return False
        # A heartbeat that has not succeeded for a whole TTL means Redis may already
        # have expired the key and handed the job to someone else.
        if self._expired():
            self._mark_lost()
            return False
        return True

    def _expired(self) -> bool:
        return time.monotonic() - self._last_renewed > self.ttl_ms / 1000

    def acquire(self) -> bool:
        """Take the lease if nobody holds it; starts the heartbeat on success."""
        ok = self._channel.acquire_lease(self.job_id, owner=self.holder, ttl_ms=self.ttl_ms)
        if not ok:
            return False
        self._acquired = True
        self._last_renewed = time.monotonic()
        self._thread = threading.Thread(
            target=self._heartbeat, name=f"lease-heartbeat:{self.job_id}", daemon=True
        )
        self._thread.start()
        return True

    def renew(self) -> bool:
        """One compare-and-set renewal; marks the lease lost if it is no longer ours."""
        try:
            ok = self._channel.renew_lease(self.job_id, owner=self.holder, ttl_ms=self.ttl_ms)
        except redis.RedisError as exc:
            # A transient error is not proof of loss; `held` expires it after one TTL.
            log.warning("lease renewal for %s failed: %r", self.job_id, exc)
            return False
        if ok:
            self._last_renewed = time.monotonic()
        else:
            log.error("lease %s lost: another worker owns the job now", self.job_id)
            self._mark_lost()
        return ok

    def release(self) -> None:
        """Stop the heartbeat and delete the key if it is still ours."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._acquired and not self._lost.is_set():
            try:
                self._channel.release_lease(self.job_id, owner=self.holder)
            except redis.RedisError as exc:
                log.warning("lease release for %s failed: %r (it will expire)", self.job_id, exc)
        self._acquired = False

    def _heartbeat(self) -> None:
        interval = self.ttl_ms / 1000 / RENEWALS_PER_TTL
        while not self._stop.wait(interval):
            if self._lost.is_set():
                return
            if not self.renew() and self._expired():
                self._mark_lost()

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
