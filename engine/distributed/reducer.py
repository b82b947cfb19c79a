"""A Trainer's gradients summed over the ranks in a few buckets, overlapped with backward.

The Trainer keeps every parameter's gradient of one (context, dtype) in one flat buffer
(:class:`engine.optimizer.flat.FlatGroup`), laid out in the order backward finishes the
parameters. A bucket is a contiguous slice of that buffer (about ``bucket_bytes``): as
soon as backward has finished every gradient in it (see :mod:`engine.grad_hooks`), its
allreduce starts, on a zero-copy view, while backward computes the earlier layers.
Buckets start strictly in bucket order, so every rank issues the same collectives in the
same order with the same sizes (the layout comes from rank 0), and the sums are the same
bits on every rank. ``finish()`` (called by ``Trainer.step``) starts whatever backward did
not, and waits.

With 2-bit compression a bucket travels as each rank's packed quantized values (an
allgather of n/4 bytes per rank) and every rank adds them up in rank order.
Several contexts on one rank: the other contexts' slices are first added into context 0's,
which is reduced, then copied back.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ..kvstore.compression import encode

FIRST_BUCKET_BYTES = 1 << 20  # small, so the first reduction starts early (as DDP's)


def bucket_bytes_from_env() -> int:
    """``RUDDER_DIST_BUCKET_MB`` (default 4) in bytes."""
    raw = os.environ.get("RUDDER_DIST_BUCKET_MB", "")
    try:
        mib = float(raw) if raw else 4.0
    except ValueError:
        raise ValueError(f"RUDDER_DIST_BUCKET_MB={raw!r} is not a number") from None
    if not mib > 0:
        raise ValueError(f"RUDDER_DIST_BUCKET_MB must be > 0, got {raw!r}")
    return int(mib * (1 << 20))


class Bucket:
    """Parameters ``indices`` at ``[start, stop)`` of group ``group``'s flat buffers."""

    __slots__ = ("group", "start", "stop", "indices", "vars", "ready", "work", "finish")

    def __init__(self, group: int, start: int, stop: int, indices: list[int]) -> None:
        self.group, self.start, self.stop, self.indices = group, start, stop, indices
        self.vars: set[int] = set()  # ids of the data arrays whose gradient it needs
        self.ready: set[int] = set()
        self.work: Any = None  # the collective in flight
        self.finish: Any = None  # what to do once it is done (decode, copy back)


class GradientReducer:
    """Sums the gradients of ``groups`` over the ranks of ``world``.

    ``groups`` is one list of FlatGroups per context, all with the same parameters in the
    same order; ``order`` is that order (parameter indices, the first finished first).
    """

    def __init__(self, world: Any, groups: list[list[Any]], order: list[int],
                 compression: Any = None, bucket_bytes: int | None = None,
                 residuals: dict[int, Any] | None = None) -> None:
        self.world = world
        self.groups = groups
        self.order = list(order)
        self.compression = compression
        self.buckets = _plan(groups[0], self.order, bucket_bytes or bucket_bytes_from_env())
        self._bucket_of: dict[int, Bucket] = {}
        for bucket in self.buckets:
            for per_context in groups:
                group = per_context[bucket.group]
                for index in bucket.indices:
                    data = group.arrays[group.indices.index(index)][0]
                    bucket.vars.add(id(data))
                    self._bucket_of[id(data)] = bucket
        self._residuals = self._make_residuals(residuals or {}) if compression else []
        self._next = 0  # the next bucket to start
        self.wait_seconds = 0.0  # time finish() spent blocked on communication
        self.bytes_sent = 0
        self.started_in_backward = 0  # buckets whose reduction began before finish()

    # ------------------------------------------------------------- notifications
    def backward_started(self, variables: dict[int, Any]) -> None:
        """A second backward before ``finish`` may rewrite gradients already on their way."""
        started = [b for b in self.buckets[:self._next] if b.vars & variables.keys()]
        if not started:
            return
        for bucket in self.buckets[:self._next]:
            self._complete(bucket)
        uncovered = [b for b in started if not b.vars <= variables.keys()]
        if uncovered:
            raise RuntimeError(
                "backward() ran again before trainer.step() while the gradients of an earlier "
                "backward were already being summed across the ranks, and it does not "
                "rewrite all of them; to accumulate gradients over several backward passes "
                "set grad_req='add' on the parameters, or set RUDDER_DIST_OVERLAP=0 to sum "
                "gradients only in step()")
        # every gradient in them is rewritten: sum them again once this backward is done
        for bucket in self.buckets:
            bucket.ready.clear()
            bucket.work = bucket.finish = None
        self._next = 0

    def grad_ready(self, variable: Any) -> None:
        bucket = self._bucket_of.get(id(variable))
        if bucket is None:
            return
        bucket.ready.add(id(variable))
        while self._next < len(self.buckets) and \
                len(self.buckets[self._next].ready) == len(self.buckets[self._next].vars):
            self._start(self.buckets[self._next])
            self._next += 1
            self.started_in_backward += 1

    # ----------------------------------------------------------------- reducing
    def finish(self) -> None:
        """Start the buckets backward did not, wait for all, leave the sums in place."""
        while self._next < len(self.buckets):
            self._start(self.buckets[self._next])
            self._next += 1
        began = time.perf_counter()
        try:
            for bucket in self.buckets:
                self._complete(bucket)
        finally:
            self.wait_seconds += time.perf_counter() - began
            for bucket in self.buckets:
                bucket.ready.clear()
            self._next = 0

    def _slices(self, bucket: Bucket) -> list[Any]:
        return [per_context[bucket.group].grad[bucket.start:bucket.stop]
                for per_context in self.groups]

    def _start(self, bucket: Bucket) -> None:
        slices = self._slices(bucket)
        target = slices[0]
        for other in slices[1:]:  # this rank's devices first, into context 0's slice
            target += other if _same_device(other, target) else _to_device(other, target)
        comm = self.world.communicator_for(target)
        if self.compression is None:
            bucket.work = comm.allreduce(target)
            bucket.finish = None
            self.bytes_sent += target.nbytes
        else:
            bucket.work, bucket.finish = self._start_compressed(comm, bucket, target)

    def _start_compressed(self, comm: Any, bucket: Bucket, target: Any) -> tuple[Any, Any]:
        from ..kvstore.dist import start_compressed

        theta = self.compression.threshold
        packed = encode(self._residuals[bucket.group][bucket.start:bucket.stop], target, theta)
        self.bytes_sent += packed.nbytes
        return start_compressed(comm, packed, target, theta)

    def _complete(self, bucket: Bucket) -> None:
        if bucket.work is None:
            return
        bucket.work.wait()
        if bucket.finish is not None:
            bucket.finish()
        slices = self._slices(bucket)
        for other in slices[1:]:
            other[...] = slices[0] if _same_device(other, slices[0]) else \
                _to_device(slices[0], other)
        bucket.work = bucket.finish = None

    # ---------------------------------------------------------------- residuals
    def _make_residuals(self, old: dict[int, Any]) -> list[Any]:
        """One flat residual per group (2-bit error feedback), carried over by parameter
        from a previous reducer when the layout changed."""
        out = []
        for group in self.groups[0]:
            xp = _xp(group.grad)
            residual = xp.zeros_like(group.grad)
            for index in group.indices:
                start, stop = group.bounds[index]
                if index in old:
                    residual[start:stop] = old[index]
            out.append(residual)
        return out

    def residuals(self) -> dict[int, Any]:
        """Each parameter's 2-bit residual (views), for the next reducer."""
        out = {}
        for group, residual in zip(self.groups[0], self._residuals, strict=True):
            for index in group.indices:
                start, stop = group.bounds[index]
                out[index] = residual[start:stop]
        return out


def _plan(groups: list[Any], order: list[int], cap: int) -> list[Bucket]:
    """Buckets over each group's buffer (laid out in ``order``), in the order their first
    parameter finishes; the first is capped at FIRST_BUCKET_BYTES."""
    position = {index: k for k, index in enumerate(order)}
    buckets: list[tuple[int, Bucket]] = []
    for g, group in enumerate(groups):
        itemsize = group.grad.itemsize
        current: list[int] = []
        for index in group.indices:
            start, stop = group.bounds[index]
            if current:
                first = group.bounds[current[0]][0]
                limit = min(FIRST_BUCKET_BYTES, cap) if not buckets and g == 0 else cap
                if (stop - first) * itemsize > limit:
                    buckets.append((position[current[0]],
                                    Bucket(g, first, group.bounds[current[-1]][1], current)))
                    current = []
            current.append(index)
        if current:
            buckets.append((position[current[0]], Bucket(
                g, group.bounds[current[0]][0], group.bounds[current[-1]][1], current)))
    buckets.sort(key=lambda item: item[0])
    return [bucket for _, bucket in buckets]


def _xp(raw: Any) -> Any:
    from ..backend import array_module

    return array_module(raw)


def _same_device(a: Any, b: Any) -> bool:
    xa, xb = _xp(a), _xp(b)
    if xa is not xb:
        return False
    return xa.__name__ == "numpy" or a.device == b.device


def _to_device(src: Any, like: Any) -> Any:
    from ..backend import to_numpy

    xp = _xp(like)
    if xp.__name__ == "numpy":
        return to_numpy(src)
    with xp.cuda.Device(like.device.id):
        return xp.asarray(src)
