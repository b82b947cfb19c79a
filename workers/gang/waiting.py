"""The gangs gathering workers on one queue, oldest job first: which gives way to which.

Two distributed jobs that each hold some of a queue's workers while they wait for the rest
would wait on each other until both time out, go back to the queue, and meet the same way
again, for ever (two 2-worker jobs on two workers do so every time). So every rank 0 that
gathers a gang stands here, ordered by its job's submit time. A rank 0 whose gang has not
filled after a moment, and which sees an older gang gathering on the same queue that the
queue's live workers can fill, gives way: its job goes back to the queue and its worker
takes a seat in the older gang at once (not through the queue, whose order it cannot
choose). The oldest gang never gives way; it fills or times out. Gangs therefore start in
submit order and none is overtaken for ever (there is no backfilling: a younger, smaller
gang waits behind an older, bigger one that the workers can fill).

A rank 0 that dies while gathering stops renewing its entry's short expiry, and the others
drop the entry when they next look.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.channel import Channel, gang_gathering_alive_key, gangs_gathering_key
from workers.gang.seats import FORMING, GangSeats, Seat

ALIVE_MS = 5_000  # an entry outlives its rank 0's last renewal by this long


@dataclass(frozen=True)
class Gathering:
    """A gang gathering workers: its job, generation and size."""

    job_id: str
    generation: int
    size: int


def _member(seat: Seat) -> str:
    return f"{seat.job_id}:{seat.generation}"


class WaitingRoom:
    """The gathering gangs of ``queue`` (Redis keys from core.channel)."""

    def __init__(self, channel: Channel, queue: str) -> None:
        self.channel = channel
        self.client: Any = channel.client
        self.queue = queue
        self.key = gangs_gathering_key(queue)

    def _alive_key(self, member: str) -> str:
        return gang_gathering_alive_key(self.queue, member)

    def enter(self, seat: Seat, submitted: float) -> None:
        """Stand in line as the gang of ``seat`` (rank 0's), by its job's submit time."""
        pipe = self.client.pipeline(transaction=True)
        pipe.zadd(self.key, {_member(seat): submitted})
        pipe.set(self._alive_key(_member(seat)), seat.size, px=ALIVE_MS)
        pipe.execute()

    def renew(self, seat: Seat) -> None:
        self.client.set(self._alive_key(_member(seat)), seat.size, px=ALIVE_MS)

    def leave(self, seat: Seat) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.zrem(self.key, _member(seat))
        pipe.delete(self._alive_key(_member(seat)))
        pipe.execute()

    def ahead_of(self, seat: Seat) -> list[Gathering]:
        """The live gangs that stand before ``seat``'s, oldest first (dead ones dropped)."""
        # ties in submit time are broken by the member, as the sorted set orders them
        rank = self.client.zrank(self.key, _member(seat))
        if not rank:  # first in line, or not in it
            return []
        members = [str(m) for m in self.client.zrange(self.key, 0, int(rank) - 1)]
        sizes = self.client.mget([self._alive_key(m) for m in members])
        ahead, dead = [], []
        for member, size in zip(members, sizes, strict=True):
            if size is None:
                dead.append(member)
                continue
            job_id, _, generation = member.rpartition(":")
            ahead.append(Gathering(job_id, int(generation), int(size)))
        if dead:
            self.client.zrem(self.key, *dead)
        return ahead

    def workers_online(self) -> int:
        """Live workers that serve this queue (by their heartbeats)."""
        return sum(1 for beat in self.channel.worker_heartbeats() if self.queue in beat.queues)

    def to_give_way_to(self, seat: Seat) -> Gathering | None:
        """The oldest gang before ``seat``'s that is still forming and that this queue's
        live workers can fill."""
        ahead = self.ahead_of(seat)
        if not ahead:
            return None
        online = self.workers_online()
        for gang in ahead:
            forming = GangSeats(self.channel, gang.job_id).state(gang.generation)[0] == FORMING
            if forming and gang.size <= online:
                return gang
        return None
