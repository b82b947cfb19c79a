"""The seats of a distributed job's gang in Redis, under (job id, generation).

Rank 0 (the worker that took the job's message and its lease) opens generation ``g``
with ``size`` seats and takes seat 0; it then asks ``size - 1`` more workers to join
(``rudder.train(job_id, g)``). A joiner's seat is its rank. Every change of the gang's
state is one Lua script, so the last seat and a timeout cannot both win: the gang is
``forming`` → ``full`` → ``started`` (rank 0's address published), or ``forming`` →
``abandoned`` (it did not fill in time), or ``failed`` (a rank gave up on it). A worker
holding a seat of a gang that is not ``forming``/``full``/``started`` leaves.

Seats expire with the gang's hash (a day): a dead generation leaves nothing behind.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from core.channel import Channel, gang_generation_key, gang_key

GANG_TTL_SECONDS = 24 * 3600
FORMING, FULL, STARTED, ABANDONED, FAILED = "forming", "full", "started", "abandoned", "failed"

# KEYS[1] gang hash. Returns the seat (rank) taken, or -1.
_JOIN_LUA = """
if redis.call('HGET', KEYS[1], 'state') ~= 'forming' then return -1 end
local size = tonumber(redis.call('HGET', KEYS[1], 'size'))
local seat = redis.call('HINCRBY', KEYS[1], 'joined', 1)
if seat > size then
  redis.call('HINCRBY', KEYS[1], 'joined', -1)
  return -1
end
if seat == size then redis.call('HSET', KEYS[1], 'state', 'full') end
return seat - 1
"""

# KEYS[1] gang hash, ARGV[1] the state to leave, ARGV[2] the new state, ARGV[3] why.
# Returns 1 when it moved.
_MOVE_LUA = """
if redis.call('HGET', KEYS[1], 'state') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'reason', ARGV[3])
return 1
"""


@dataclass(frozen=True)
class Seat:
    """This worker's place in one generation of a job's gang."""

    job_id: str
    generation: int
    rank: int
    size: int


class GangSeats:
    """Redis operations on one job's gangs (key names come from core.channel)."""

    def __init__(self, channel: Channel, job_id: str) -> None:
        self.client: Any = channel.client
        self.job_id = job_id
        self._join = self.client.register_script(_JOIN_LUA)
        self._move = self.client.register_script(_MOVE_LUA)

    def _key(self, generation: int) -> str:
        return gang_key(self.job_id, generation)

    def open(self, size: int) -> Seat:
        """A new generation with seat 0 taken by the caller (rank 0)."""
        generation = int(self.client.incr(gang_generation_key(self.job_id)))
        key = self._key(generation)
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(key, mapping={"size": size, "joined": 1,
                                "state": FULL if size == 1 else FORMING})
        pipe.expire(key, GANG_TTL_SECONDS)
        pipe.execute()
        return Seat(self.job_id, generation, 0, size)

    def join(self, generation: int) -> Seat | None:
        """A seat in ``generation`` if it is still forming; None otherwise."""
        key = self._key(generation)
        rank = int(self._join(keys=[key]))
        if rank < 0:
            return None
        size = int(self.client.hget(key, "size") or 0)
        return Seat(self.job_id, generation, rank, size)

    def joined(self, generation: int) -> int:
        return int(self.client.hget(self._key(generation), "joined") or 0)

    def state(self, generation: int) -> tuple[str | None, str | None]:
        """(state, reason) of a generation; (None, None) once it expired."""
        state, reason = self.client.hmget(self._key(generation), ["state", "reason"])
        return state, reason

    def abandon(self, generation: int, reason: str) -> bool:
        """End a gang that did not fill; False when its last seat was taken first."""
        return bool(self._move(keys=[self._key(generation)], args=[FORMING, ABANDONED, reason]))

    def start(self, generation: int, address: str) -> None:
        """Publish rank 0's address: the ranks meet there."""
        key = self._key(generation)
        self.client.hset(key, mapping={"address": address, "state": STARTED})

    def fail(self, generation: int, reason: str) -> None:
        """Mark a generation over (any rank that gives up on it); the next is a new one."""
        for state in (FORMING, FULL, STARTED):
            if self._move(keys=[self._key(generation)], args=[state, FAILED, reason]):
                return

    def current_generation(self) -> int:
        return int(self.client.get(gang_generation_key(self.job_id)) or 0)

    def wait_address(self, generation: int, timeout: float,
                     poll: float = 0.1) -> tuple[str | None, str]:
        """Rank 0's ``host:port`` once published, or (None, why) when the gang ended or
        ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        key = self._key(generation)
        while True:
            state, address, reason = self.client.hmget(key, ["state", "address", "reason"])
            if state == STARTED and address:
                return str(address), ""
            if state not in (FORMING, FULL):
                return None, str(reason or f"the gang is {state or 'gone'}")
            if time.monotonic() > deadline:
                return None, f"rank 0 published no address within {timeout:g} s"
            time.sleep(poll)
