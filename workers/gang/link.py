"""What the ranks of a distributed job agree on at every step boundary, in one collective.

Each boundary is one small float64 allreduce (a sum) over the engine's Gloo communicator.
Rank 0 writes the decision header (the length of the decided commands' JSON and whether
its lease is gone), every rank adds its own slots (its shutdown vote, the step it last
applied a decision at, its throughput, a digest of its weights at the end) and its
training metrics' running sums. After the sum every rank holds the same decision and the
metrics over the global batch. When rank 0 decided commands, their JSON follows in one
broadcast; nothing else moves, so a boundary costs one tiny collective.

Layout (N ranks, M summed metrics)::

    [payload bytes, lease lost, shutdown votes,
     applied step + 1 per rank (N), samples/s per rank (N), weights digest per rank (N),
     (sum, count) per metric (2M)]

Counts and digests (< 2**32) are exact in float64.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import TypeAdapter

from core.commands import Command

_HEADER = 3
_COMMANDS: TypeAdapter[list[Command]] = TypeAdapter(list[Command])


@dataclass(frozen=True)
class Contribution:
    """One rank's part of a boundary's exchange (rank 0 adds the decision)."""

    commands: list[Command] = field(default_factory=list)  # rank 0: decided, in order
    lease_lost: bool = False  # rank 0
    shutdown: bool = False  # this rank's worker is stopping (SIGTERM)
    applied_step: int | None = None  # the first step after this rank's last decision
    samples_per_second: float = 0.0
    digest: int = 0  # crc32 of this rank's weights (the closing exchange only)
    metric_sums: list[tuple[float, float]] = field(default_factory=list)


@dataclass(frozen=True)
class Agreed:
    """What every rank holds after the exchange."""

    commands: list[Command]
    lease_lost: bool
    shutdown: bool
    applied_steps: list[int | None]
    samples_per_second: list[float]
    digests: list[int]
    metric_sums: list[tuple[float, float]]


class Link:
    """The boundary exchange of one rank (``world`` is :func:`engine.distributed.init`'s)."""

    def __init__(self, world: Any, num_metrics: int) -> None:
        self.comm = world.cpu
        self.rank = int(world.rank)
        self.size = int(world.size)
        self.num_metrics = num_metrics
        self._buffer = np.zeros(_HEADER + 3 * self.size + 2 * num_metrics, dtype=np.float64)

    def exchange(self, mine: Contribution) -> Agreed:
        n, buf = self.size, self._buffer
        buf[:] = 0.0
        payload = b""
        if self.rank == 0:
            if mine.commands:
                payload = _COMMANDS.dump_json(mine.commands)
            buf[0], buf[1] = len(payload), float(mine.lease_lost)
        buf[2] = float(mine.shutdown)
        r = self.rank
        buf[_HEADER + r] = 0.0 if mine.applied_step is None else mine.applied_step + 1
        buf[_HEADER + n + r] = mine.samples_per_second
        buf[_HEADER + 2 * n + r] = mine.digest
        base = _HEADER + 3 * n
        for k, (total, count) in enumerate(mine.metric_sums[:self.num_metrics]):
            buf[base + 2 * k], buf[base + 2 * k + 1] = total, count
        self.comm.allreduce(buf).wait()
        length = int(buf[0])
        commands: list[Command] = []
        if length:
            raw = np.frombuffer(payload, dtype=np.uint8).copy() if self.rank == 0 else \
                np.zeros(length, dtype=np.uint8)
            self.comm.broadcast(raw, root=0).wait()
            commands = _COMMANDS.validate_json(raw.tobytes())
        acks = [int(v) - 1 if v > 0 else None for v in buf[_HEADER:_HEADER + n]]
        return Agreed(
            commands=commands, lease_lost=buf[1] > 0, shutdown=buf[2] > 0,
            applied_steps=acks,
            samples_per_second=[float(v) for v in buf[_HEADER + n:_HEADER + 2 * n]],
            digests=[int(v) for v in buf[_HEADER + 2 * n:_HEADER + 3 * n]],
            metric_sums=[(float(buf[base + 2 * k]), float(buf[base + 2 * k + 1]))
                         for k in range(self.num_metrics)],
        )

    def share_json(self, value: Any) -> Any:
        """Rank 0's ``value`` (JSON-able) on every rank: what a run starts from."""
        length = np.zeros(1, dtype=np.int64)
        blob = json.dumps(value).encode() if self.rank == 0 else b""
        length[0] = len(blob)
        self.comm.broadcast(length, root=0).wait()
        raw = np.frombuffer(blob, dtype=np.uint8).copy() if self.rank == 0 else \
            np.zeros(int(length[0]), dtype=np.uint8)
        if raw.size:
            self.comm.broadcast(raw, root=0).wait()
        return json.loads(raw.tobytes()) if raw.size else None
