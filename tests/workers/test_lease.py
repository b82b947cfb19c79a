from __future__ import annotations

import os
import threading
import time

from core.channel import Channel, lease_key
from tests.services import wait_until
from workers.lease import Lease

JOB = "00000000-0000-0000-0000-00000000000a"


def test_second_worker_cannot_take_a_held_lease(channel: Channel) -> None:
    first = Lease(channel, JOB, ttl_seconds=0.6)
    second = Lease(channel, JOB, ttl_seconds=0.6)
    assert first.acquire()
    try:
        assert not second.acquire()
        time.sleep(1.0)  # longer than the TTL: the heartbeat must have kept it alive
        assert first.held
        assert not second.acquire()
        assert channel.lease_owner(JOB) == first.holder
    finally:
        first.release()
    assert channel.lease_owner(JOB) is None
    assert second.acquire()
    second.release()


def test_lease_taken_over_after_expiry_fences_the_old_holder(channel: Channel) -> None:
    old = Lease(channel, JOB, ttl_seconds=0.3)
    assert old.acquire()
    # Simulate a stalled worker: its key vanishes (expired) and another worker takes over.
    channel.client.delete(lease_key(JOB))
    new = Lease(channel, JOB, ttl_seconds=5)
    assert new.acquire()
    wait_until(lambda: not old.held, 2, what="old holder to notice the lost lease")
    old.release()  # must not delete the new holder's lease
    assert channel.lease_owner(JOB) == new.holder
    new.release()


def test_lease_counts_as_lost_when_heartbeats_stop_for_a_ttl(channel: Channel) -> None:
    lease = Lease(channel, JOB, ttl_seconds=0.3)
    assert lease.acquire()
    lease._stop.set()  # heartbeat thread stops, as if the process stalled
    time.sleep(0.5)
    assert not lease.held
    lease.release()


def test_heartbeat_reports_a_lost_lease_without_being_asked(channel: Channel) -> None:
    # The training loop checks one flag per step; the heartbeat thread must raise it.
    lost = threading.Event()
    old = Lease(channel, JOB, ttl_seconds=0.3)
    old.when_lost(lost.set)
    assert old.acquire()
    channel.client.delete(lease_key(JOB))
    new = Lease(channel, JOB, ttl_seconds=5)
    assert new.acquire()
    assert lost.wait(2), "the heartbeat did not report the takeover"
    assert not old.held
    old.release()
    new.release()


def _burn_cpu(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pass


def test_a_busy_worker_keeps_its_lease(channel: Channel) -> None:
    """No false take-over under load: the training thread holding the GIL in pure Python
    and every core busy with other processes must not starve the heartbeat for a TTL."""
    import multiprocessing

    burners = [multiprocessing.get_context("spawn").Process(target=_burn_cpu, args=(4.0,))
               for _ in range(max(2, (os.cpu_count() or 2)))]
    for burner in burners:
        burner.start()
    lease = Lease(channel, JOB, ttl_seconds=1.0)
    assert lease.acquire()
    try:
        _burn_cpu(3.0)  # this thread, GIL-bound, for three TTLs
        assert lease.held
        assert channel.lease_owner(JOB) == lease.holder
    finally:
        lease.release()
        for burner in burners:
            burner.join(10)
