"""Collectives on GPU arrays through host memory, for ranks that share one GPU.

NCCL refuses a communicator in which two ranks hold the same device (``ncclCommInitRank``
answers NCCL_ERROR_INVALID_USAGE: measured on an H100 with NCCL 2.28), so ranks on a
one-GPU machine, or several ranks packed on one card, cannot reduce through it. This
communicator copies each buffer to the host, runs the collective on the world's Gloo
communicator and copies the result back: the same API and results as NCCL, at the cost of
the two copies (PCIe, not NVLink). :meth:`World.communicator_for` picks it when the ranks'
GPUs (by PCI bus id) are not all different, or when cupy was built without NCCL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .comm import Communicator, Work


class _StagedWork(Work):
    __slots__ = ("_work", "_finish", "_done")

    def __init__(self, work: Work, finish: Callable[[], None]) -> None:
        self._work, self._finish, self._done = work, finish, False

    def done(self) -> bool:
        return self._done or self._work.done()

    def wait(self) -> None:
        if not self._done:
            self._work.wait()
            self._finish()  # the result back on the device, on the caller's stream
            self._done = True


class HostStagedCommunicator(Communicator):
    """GPU collectives over ``host``'s (Gloo's) collectives, through host copies."""

    def __init__(self, host: Communicator) -> None:
        self._host = host
        self.rank, self.size, self.timeout = host.rank, host.size, host.timeout

    def allreduce(self, buf: Any) -> Work:
        staged = np.ascontiguousarray(buf.get())
        return _StagedWork(self._host.allreduce(staged), lambda: buf.set(staged))

    def broadcast(self, buf: Any, root: int = 0) -> Work:
        staged = np.ascontiguousarray(buf.get())
        return _StagedWork(self._host.broadcast(staged, root), lambda: buf.set(staged))

    def allgather(self, send: Any, recv: Any) -> Work:
        staged = np.empty(recv.shape, dtype=recv.dtype)
        return _StagedWork(self._host.allgather(np.ascontiguousarray(send.get()), staged),
                           lambda: recv.set(staged))

    def barrier(self) -> None:
        self._host.barrier()

    def close(self) -> None:
        pass  # the host communicator belongs to the world
