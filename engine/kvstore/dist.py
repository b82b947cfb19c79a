"""``dist_sync`` / ``dist_device_sync`` / ``dist_async``: one store spread over N processes.

MXNet keeps the values on parameter servers; Rudder keeps a replica on every rank and
reduces over an existing collective library instead (Gloo for host arrays, NCCL for GPU
arrays; see :mod:`engine.distributed`). What a script sees is MXNet's:

- ``init``: rank 0's value wins on every rank (a broadcast; MXNet pushes rank 0's value
  to the servers and waits at a barrier).
- ``push``: each rank first sums its own devices' values, then the sums of all ranks are
  added (never averaged). With an optimizer set, every rank runs the same update on the
  same sum, so all replicas stay equal to what MXNet's server would hold; without one the
  stored value becomes the sum.
- ``pull``: the stored value, read locally (nothing travels: every replica is the same).
- 2-bit compression: only what a rank pushes is compressed (with its own residual per
  key), 2 bits per value on the wire; init and pull are not, as in MXNet.
- ``dist_async``: runs synchronously (see the README's "Distributed training").

Pushes of several keys in one call travel fused, a few flat buffers instead of one
collective per key. Every rank must make the same calls in the same order (as MXNet's
dist_sync requires: the servers wait for every worker's push).

Under ``python -m engine.launch -n 2 script.py``, each rank running::

    kv = mx.kv.create("dist_sync")
    kv.init(0, mx.nd.zeros((2,)))
    kv.push(0, mx.nd.ones((2,)) * (kv.rank + 1))
    out = mx.nd.zeros((2,)); kv.pull(0, out=out)   # [3.0, 3.0] on both ranks
"""

from __future__ import annotations

from typing import Any

import numpy

from ..context import cpu
from ..ndarray import NDArray
from .compression import decode_sum, wire_bytes
from .local import KVStore, _group

# arrays of one dtype pushed together travel in flat buffers of at most this many bytes
FUSE_BYTES = 4 << 20
# a large array is reduced in chunks this big, each copied into the store while the next
# travels (measured on loopback, 2 ranks on 2 cores, against Gloo called directly: 16 MiB
# chunks left a 16 MiB array's copy unhidden, 0.84x; 8 MiB gave 0.96x, 2-4 MiB no better)
PIPELINE_BYTES = 8 << 20
CONTROL_BYTES = 4096


class DistKVStore(KVStore):
    """The distributed store (``mx.kv.create('dist_sync')``); see the module notes."""

    def __init__(self, kv_type: str = "dist_sync", world: Any = None) -> None:
        super().__init__(kv_type)
        if world is None:
            from .. import distributed

            world = distributed.init()
        self._world = world

    # ------------------------------------------------------------------ identity
    @property
    def rank(self) -> int:
        return int(self._world.rank)

    @property
    def num_workers(self) -> int:
        return int(self._world.size)

    @property
    def world(self) -> Any:
        """The :class:`engine.distributed.World` this store reduces over."""
        return self._world

    @property
    def compression(self) -> Any:
        """The 2-bit compressor set by ``set_gradient_compression`` (None: none)."""
        return self._compression

    def barrier(self) -> None:
        """Return once every worker has reached this barrier."""
        self._world.cpu.barrier()

    def _store_context(self, first: NDArray) -> Any:
        # dist_sync merges on the host as MXNet's CommCPU does; the *device* flavour keeps
        # the values where they were pushed from
        return first.context if "device" in self._type else cpu()

    # --------------------------------------------------------------------- init
    def init(self, key: Any, value: Any) -> None:
        """Store rank 0's value of every key on every rank (one fused broadcast)."""
        pairs = _group(key, value)
        staged = []
        for k, values in pairs:
            self._check_key(k)
            if k in self._store:
                raise ValueError(f"duplicate init of key {k}")
            staged.append(values[0].copyto(self._store_context(values[0])))
        broadcast_arrays([s.raw for s in staged], self._world)
        for (k, _), stored in zip(pairs, staged, strict=True):
            self._store[k] = stored

    def broadcast(self, key: Any, value: Any, out: Any, priority: int = 0) -> None:
        self.init(key, value)
        self.pull(key, out, priority)

    # --------------------------------------------------------------------- push
    def push(self, key: Any, value: Any, priority: int = 0) -> None:
        """Sum over devices, then over ranks; update (or overwrite) each stored value."""
        pairs = _group(key, value)
        merged = []
        for k, values in pairs:
            stored = self._stored(k)
            merged.append(self._local_sum(k, values, stored))
        self._reduce_over_ranks([k for k, _ in pairs], merged)
        for (k, _), total in zip(pairs, merged, strict=True):
            stored = self._stored(k)
            if self._updater is not None:
                self._updater(k, NDArray(total, stored.context), stored)
            else:
                self._store[k] = NDArray(total, stored.context)

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        """push + pull. One array per key with no optimizer and no compression (a plain
        allreduce) is summed in place in ``out`` (zero-copy), in chunks whose copy into
        the store overlaps the next chunk's reduction."""
        pairs = _group(key, value)
        outs = _group(key, value if out is None else out)
        if self._updater is not None or self._compression is not None or any(
                len(v) != 1 or len(o) != 1 for (_, v), (_, o) in zip(pairs, outs, strict=True)):
            super().pushpull(key, value, out, priority)
            return
        for (k, (v,)), (_, (o,)) in zip(pairs, outs, strict=True):
            stored = self._stored(k)
            if v.shape != stored.shape or o.shape != stored.shape or \
                    o.context != stored.context or not o.raw.flags.c_contiguous or \
                    o.raw.dtype != stored.raw.dtype:
                super().pushpull(k, v, o, priority)
                continue
            if o is not v:
                v.copyto(o)
            _allreduce_then_copy(o.raw, stored.raw, self._world)

    def _local_sum(self, key: Any, values: list[NDArray], stored: NDArray) -> Any:
        """A private buffer holding the sum of this rank's values (devices in order)."""
        ctx = stored.context
        total = None
        for v in values:
            if v.shape != stored.shape:
                raise ValueError(f"pushed shape {v.shape} does not match key {key!r}'s "
                                 f"shape {stored.shape}")
            raw = v.as_in_context(ctx).raw if v.context != ctx else v.raw
            if total is None:
                total = raw.astype(stored.raw.dtype, copy=True)
            else:
                total += raw
        return total

    def _reduce_over_ranks(self, keys: list[Any], arrays: list[Any]) -> None:
        if self._compression is not None:
            for k, arr in zip(keys, arrays, strict=True):
                if arr.dtype != numpy.float32:
                    raise ValueError("Gradient compression is only supported for float32 "
                                     f"type of parameters (key {k!r} is {arr.dtype})")
            theta = self._compression.threshold
            pending = [start_compressed(self._world.communicator_for(a),
                                        self._compression.encode(k, a), a, theta)
                       for k, a in zip(keys, arrays, strict=True)]
            for work, finish in pending:
                work.wait()
                finish()
            return
        allreduce_arrays(arrays, self._world)

    # ------------------------------------------------------------- small payloads
    def exchange(self, control: bytes | None = None, values: Any = None,
                 capacity: int = CONTROL_BYTES) -> tuple[bytes, Any]:
        """Rank 0's ``control`` bytes to every rank and the sum of every rank's ``values``,
        in one small collective.

        Made for a step boundary that every rank must agree on: rank 0 reads a command,
        every rank calls ``exchange`` after backward (the gradients are already on their
        way, so this queues right behind them) and applies the same decision before
        ``trainer.step``; ``values`` carries per-rank sums to add up (loss, correct
        predictions, samples) in float64. Other ranks' ``control`` is ignored.
        """
        sums = numpy.zeros(0) if values is None else numpy.asarray(values, numpy.float64)
        payload = (control or b"") if self.rank == 0 else b""
        if len(payload) > capacity:
            raise ValueError(f"control payload of {len(payload)} bytes exceeds "
                             f"capacity={capacity}")
        buf = numpy.zeros(1 + capacity + sums.size, numpy.float64)
        if self.rank == 0:
            buf[0] = len(payload)
            buf[1:1 + len(payload)] = numpy.frombuffer(payload, numpy.uint8)
        buf[1 + capacity:] = sums.reshape(-1)
        self._world.cpu.allreduce(buf).wait()
        size = int(buf[0])
        received = buf[1:1 + size].astype(numpy.uint8).tobytes()
        return received, buf[1 + capacity:].reshape(sums.shape)


# ------------------------------------------------------------ fused collectives
def _fused_groups(arrays: list[Any], world: Any) -> list[tuple[Any, list[int]]]:
    """Indices of ``arrays`` grouped by (communicator, dtype) in first-seen order, each
    group split where it would pass FUSE_BYTES."""
    groups: dict[tuple[int, str], list[list[int]]] = {}
    comms: dict[tuple[int, str], Any] = {}
    for i, arr in enumerate(arrays):
        comm = world.communicator_for(arr)
        key = (id(comm), arr.dtype.str)
        comms[key] = comm
        chunks = groups.setdefault(key, [[]])
        used = sum(arrays[j].nbytes for j in chunks[-1])
        if chunks[-1] and used + arr.nbytes > FUSE_BYTES:
            chunks.append([])
        chunks[-1].append(i)
    return [(comms[key], chunk) for key, chunks in groups.items() for chunk in chunks]


def _collective_arrays(arrays: list[Any], world: Any, op: str) -> None:
    """Run ``op`` ('allreduce' | 'broadcast') on every array, in place: one array alone
    travels as it is (zero-copy), several small ones through one flat buffer."""
    pending = []
    for comm, members in _fused_groups(arrays, world):
        run = comm.allreduce if op == "allreduce" else comm.broadcast
        if len(members) == 1 and arrays[members[0]].flags.c_contiguous:
            pending.append((run(arrays[members[0]]), None, None))
            continue
        xp = _xp(arrays[members[0]])
        flat = xp.concatenate([arrays[i].reshape(-1) for i in members])
        pending.append((run(flat), flat, members))
    for work, flat, members in pending:
        work.wait()
        if flat is None:
            continue
        start = 0
        for i in members:
            arr = arrays[i]
            arr[...] = flat[start:start + arr.size].reshape(arr.shape)
            start += arr.size


def _allreduce_then_copy(buf: Any, copy: Any, world: Any) -> None:
    """Sum ``buf`` over the ranks in place and leave the result in ``copy`` too."""
    comm = world.communicator_for(buf)
    flat, dest = buf.reshape(-1), copy.reshape(-1)
    step = max(1, PIPELINE_BYTES // buf.itemsize)
    works = [(comm.allreduce(flat[i:i + step]), i) for i in range(0, flat.size, step)]
    for work, i in works:
        work.wait()
        dest[i:i + step] = flat[i:i + step]


def allreduce_arrays(arrays: list[Any], world: Any) -> None:
    """Sum each raw array over all ranks, in place, fused into few collectives."""
    _collective_arrays(arrays, world, "allreduce")


def broadcast_arrays(arrays: list[Any], world: Any) -> None:
    """Overwrite each raw array with rank 0's, fused into few collectives."""
    _collective_arrays(arrays, world, "broadcast")


def start_compressed(comm: Any, packed: Any, out: Any, threshold: float) -> tuple[Any, Any]:
    """Gather every rank's 2-bit ``packed`` values (see compression.encode); returns the
    work in flight and a function that writes their dequantized sum into ``out``."""
    xp = _xp(out)
    gathered = xp.empty((comm.size, wire_bytes(out.size)), dtype=xp.uint8)
    work = comm.allgather(packed, gathered)
    return work, lambda: decode_sum(gathered, out.size, threshold, out)


def _xp(arr: Any) -> Any:
    from ..backend import array_module

    return array_module(arr)
