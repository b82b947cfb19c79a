"""NCCL collectives on cupy buffers (``cupy.cuda.nccl``), behind the same Communicator API.

Rank 0 makes NCCL's unique id and publishes it through the rendezvous store (NCCL itself
does not rendezvous); every rank then joins the communicator on its current device.
Operations run on a private stream that first waits for the work already queued on the
caller's stream; ``Work.wait()`` polls an event until the collective ends, so a dead or
stopped peer cannot block forever: past the timeout the communicator is aborted (NCCL's
own way out of a hung collective) and DistributedError says why.

Written for the GPU machines this project borrows; it needs a CUDA device and cupy.
"""

from __future__ import annotations

import time
from typing import Any

from .comm import Communicator, DistributedError, Work

_UID_KEY = "nccl/unique-id"
_POLL_SECONDS = 0.0005


def _nccl_dtype(nccl: Any, dtype: Any) -> int:
    table = {"float16": nccl.NCCL_FLOAT16, "float32": nccl.NCCL_FLOAT32,
             "float64": nccl.NCCL_FLOAT64, "int8": nccl.NCCL_INT8, "uint8": nccl.NCCL_UINT8,
             "int32": nccl.NCCL_INT32, "int64": nccl.NCCL_INT64}
    try:
        return int(table[dtype.name])
    except KeyError:
        raise ValueError(f"NCCL cannot reduce arrays of dtype {dtype.name}") from None


def encode_unique_id(uid: Any) -> bytes:
    """The id as the store carries it: cupy 14 gives bytes, older cupy a tuple of C chars
    (-128..127)."""
    if isinstance(uid, (bytes, bytearray)):
        return bytes(uid)
    return bytes(int(c) % 256 for c in uid)


def decode_unique_id(blob: bytes) -> tuple[int, ...]:
    """The tuple form older cupy's NcclCommunicator takes."""
    return tuple(b - 256 if b > 127 else b for b in blob)


def _join(nccl: Any, size: int, blob: bytes, rank: int) -> Any:
    try:
        return nccl.NcclCommunicator(size, blob, rank)  # cupy >= 14 takes the bytes
    except TypeError:
        return nccl.NcclCommunicator(size, decode_unique_id(blob), rank)


class _NcclWork(Work):
    __slots__ = ("_comm", "_event", "_what", "_keep", "_done")

    def __init__(self, comm: NcclCommunicator, event: Any, what: str, keep: Any) -> None:
        self._comm, self._event, self._what, self._keep = comm, event, what, keep
        self._done = False

    def done(self) -> bool:
        return self._done or bool(self._event.done)

    def wait(self) -> None:
        if self._done:
            return
        deadline = time.monotonic() + self._comm.timeout
        while not self._event.done:
            self._comm._check(self._what)
            if time.monotonic() > deadline:
                raise self._comm._abort(
                    f"timed out after {self._comm.timeout:g} s waiting for the other ranks "
                    f"(a rank stopped, hangs or cannot be reached)", self._what)
            time.sleep(_POLL_SECONDS)
        # later work on the caller's stream must see the result
        self._comm._cupy.cuda.get_current_stream().wait_event(self._event)
        self._done = True
        self._keep = None


class NcclCommunicator(Communicator):
    """NCCL on the current CUDA device; ``store`` carries rank 0's unique id."""

    def __init__(self, store: Any, rank: int, size: int, timeout: float,
                 prefix: str = "nccl") -> None:
        import cupy
        from cupy.cuda import nccl

        self._cupy, self._nccl = cupy, nccl
        self.rank, self.size, self.timeout = rank, size, timeout
        self._broken: str | None = None
        key = f"{prefix}/{_UID_KEY}"
        if rank == 0:
            store.set(key, encode_unique_id(nccl.get_unique_id()))
        store.wait([key])
        self.device = cupy.cuda.Device()
        self._comm = _join(nccl, size, bytes(store.get(key)), rank)
        self._stream = cupy.cuda.Stream(non_blocking=True)

    # ----------------------------------------------------------------- failures
    def _check(self, what: str) -> None:
        try:
            self._comm.check_async_error()
        except Exception as err:  # cupy raises NcclError for a peer's failure
            raise self._abort(f"NCCL reported an error ({err})", what) from None

    def _abort(self, cause: str, what: str) -> DistributedError:
        self._broken = f"rank {self.rank} of {self.size}: {what} failed: {cause}"
        try:
            self._comm.abort()
        except Exception:
            pass  # aborting a failed communicator may itself fail; it is unusable anyway
        return DistributedError(self._broken)

    # --------------------------------------------------------------- operations
    def _launch(self, what: str, run: Any, keep: Any) -> Work:
        if self._broken is not None:
            raise DistributedError(f"{self._broken} (an earlier collective failed)")
        ready = self._cupy.cuda.Event()
        ready.record(self._cupy.cuda.get_current_stream())
        self._stream.wait_event(ready)
        run(self._stream.ptr)
        finished = self._cupy.cuda.Event(disable_timing=True)
        finished.record(self._stream)
        return _NcclWork(self, finished, what, keep)

    def allreduce(self, buf: Any) -> Work:
        nccl = self._nccl
        kind = _nccl_dtype(nccl, buf.dtype)
        return self._launch("allreduce", lambda s: self._comm.allReduce(
            buf.data.ptr, buf.data.ptr, buf.size, kind, nccl.NCCL_SUM, s), buf)

    def broadcast(self, buf: Any, root: int = 0) -> Work:
        kind = _nccl_dtype(self._nccl, buf.dtype)
        return self._launch("broadcast", lambda s: self._comm.broadcast(
            buf.data.ptr, buf.data.ptr, buf.size, kind, root, s), buf)

    def allgather(self, send: Any, recv: Any) -> Work:
        if recv.shape != (self.size,) + send.shape:
            raise ValueError(f"allgather needs recv of shape {(self.size,) + send.shape}")
        kind = _nccl_dtype(self._nccl, send.dtype)
        return self._launch("allgather", lambda s: self._comm.allGather(
            send.data.ptr, recv.data.ptr, send.size, kind, s), (send, recv))

    def barrier(self) -> None:
        token = self._cupy.zeros(1, dtype=self._cupy.float32)
        self.allreduce(token).wait()

    def close(self) -> None:
        self._broken = self._broken or "the communicator was closed"
        comm, self._comm = getattr(self, "_comm", None), None
        if comm is not None:
            comm.destroy()
