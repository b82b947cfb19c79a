"""The line of gathering gangs in a real Redis: a younger gang is told to give way only to
an older one that is alive, still forming and fillable by the queue's live workers."""

from __future__ import annotations

import time

import pytest

from core.channel import Channel
from core.events import WorkerHeartbeat
from workers.gang import waiting
from workers.gang.seats import GangSeats
from workers.gang.waiting import Gathering, WaitingRoom


def _workers(channel: Channel, count: int, queue: str = "cpu") -> None:
    for i in range(count):
        channel.publish_heartbeat(WorkerHeartbeat(worker_id=f"{queue}-{i}", hostname="h",
                                                  queues=[queue], time=time.time()), ttl_s=30)


def test_the_younger_gang_gives_way_to_the_older_one_only(channel: Channel) -> None:
    _workers(channel, 2)
    room = WaitingRoom(channel, "cpu")
    older, younger = GangSeats(channel, "job-old").open(2), GangSeats(channel, "job-new").open(2)
    room.enter(younger, submitted=200.0)  # stood in line second, submitted first
    room.enter(older, submitted=100.0)
    assert room.to_give_way_to(younger) == Gathering("job-old", 1, 2)
    assert room.to_give_way_to(older) is None  # the oldest never gives way
    # the older gang filled: nothing to give way to any more
    assert GangSeats(channel, "job-old").join(1) is not None
    assert room.to_give_way_to(younger) is None
    room.leave(older)
    assert room.ahead_of(younger) == []


def test_no_giving_way_to_a_gang_the_live_workers_cannot_fill(channel: Channel) -> None:
    _workers(channel, 2)
    _workers(channel, 5, queue="gpu")  # another queue's workers do not count
    room = WaitingRoom(channel, "cpu")
    big, small = GangSeats(channel, "job-big").open(3), GangSeats(channel, "job-small").open(2)
    room.enter(big, submitted=1.0)
    room.enter(small, submitted=2.0)
    assert room.workers_online() == 2
    assert room.ahead_of(small) == [Gathering("job-big", 1, 3)]
    assert room.to_give_way_to(small) is None
    _workers(channel, 3)
    assert room.to_give_way_to(small) == Gathering("job-big", 1, 3)


def test_a_gang_whose_rank_0_died_is_dropped_from_the_line(
        channel: Channel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waiting, "ALIVE_MS", 200)
    _workers(channel, 2)
    room = WaitingRoom(channel, "cpu")
    dead, alive = GangSeats(channel, "job-dead").open(2), GangSeats(channel, "job-alive").open(2)
    room.enter(dead, submitted=1.0)
    room.enter(alive, submitted=2.0)
    assert room.to_give_way_to(alive) == Gathering("job-dead", 1, 2)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:  # rank 0 of job-dead renews nothing any more
        room.renew(alive)
        time.sleep(0.05)
    assert room.ahead_of(alive) == []
    assert channel.client.zrange(room.key, 0, -1) == [f"job-alive:{alive.generation}"]
