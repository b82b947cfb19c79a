"""Collectives over a maintained library: Gloo (through ``torch.distributed``) for host arrays.

The engine never moves bytes between ranks itself. :class:`GlooCommunicator` hands numpy
buffers to Gloo as zero-copy ``torch.from_numpy`` views (torch is used purely as the
communication library; no tensor math runs in it). Every operation can run asynchronously:
it returns a :class:`Work` whose ``wait()`` blocks until the result is in the buffer, so a
caller can start the reduction of early gradients while backward computes the rest.

Failures become :class:`DistributedError` with what went wrong in words: a peer that died
closes its sockets, which Gloo reports at once; a peer that stopped (SIGSTOP, a hung
machine) is noticed when the collective timeout runs out.
"""

from __future__ import annotations

import abc
from datetime import timedelta
from typing import Any

EXTRA_HINT = ("install Rudder's `dist` extra (`pip install -e '.[dist]'`, which pins the "
              "CPU build torch==2.13.0; `make up` and `make test` install it)")


class DistributedError(RuntimeError):
    """A collective failed: a rank died, stopped, or cannot be reached."""


def import_torch_distributed() -> Any:
    """``torch.distributed``, or an ImportError that names the extra to install."""
    try:
        import torch  # noqa: F401
        import torch.distributed as dist
    except ImportError as err:
        raise ImportError(f"distributed training needs PyTorch's Gloo collectives: "
                          f"{EXTRA_HINT} ({err})") from err
    if not dist.is_available() or not dist.is_gloo_available():
        raise ImportError(f"this torch build has no Gloo backend: {EXTRA_HINT}")
    return dist


def explain(err: BaseException, rank: int, size: int, what: str, timeout: float) -> str:
    """A one-line account of a failed collective, with the library's own words after it."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    low = text.lower()
    if "timed out" in low or "timeout" in low:
        cause = (f"timed out after {timeout:g} s waiting for the other ranks (a rank stopped, "
                 f"hangs or cannot be reached)")
    elif any(s in low for s in ("closed by peer", "connection reset", "broken pipe",
                                "connection refused", "end of file", "eof")):
        cause = "a peer closed its connection (a rank died or was killed)"
    else:
        cause = "the collective library failed"
    return f"rank {rank} of {size}: {what} failed: {cause} [{text}]"


class Work(abc.ABC):
    """The handle of a collective in flight."""

    @abc.abstractmethod
    def wait(self) -> None:
        """Block until the result is in the output buffer; DistributedError on failure."""

    @abc.abstractmethod
    def done(self) -> bool:
        """True once ``wait()`` would not block."""


class DoneWork(Work):
    """An operation that finished at once (one rank alone needs no communication)."""

    def wait(self) -> None:
        pass

    def done(self) -> bool:
        return True


class Communicator(abc.ABC):
    """In-place collectives among ``size`` ranks on raw arrays of one kind (numpy or cupy).

    Buffers must be C-contiguous and stay untouched until the returned work is waited for.
    Every rank must issue the same operations in the same order.
    """

    rank: int
    size: int
    timeout: float

    @abc.abstractmethod
    def allreduce(self, buf: Any) -> Work:
        """Sum ``buf`` over all ranks, in place."""

    @abc.abstractmethod
    def broadcast(self, buf: Any, root: int = 0) -> Work:
        """Overwrite ``buf`` on every rank with ``root``'s."""

    @abc.abstractmethod
    def allgather(self, send: Any, recv: Any) -> Work:
        """``recv[r] = send`` of rank r, for every r (``recv`` has shape (size, *send.shape))."""

    @abc.abstractmethod
    def barrier(self) -> None:
        """Return once every rank has reached this barrier."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connections (the communicator cannot be used afterwards)."""


def _check_buffer(buf: Any) -> None:
    if not buf.flags.c_contiguous:
        raise ValueError("collective buffers must be C-contiguous")


class _GlooWork(Work):
    __slots__ = ("_comm", "_work", "_what", "_keep", "_done")

    def __init__(self, comm: GlooCommunicator, work: Any, what: str, keep: Any) -> None:
        self._comm, self._work, self._what, self._keep = comm, work, what, keep
        self._done = False

    def wait(self) -> None:
        if self._done:
            return
        try:
            self._work.wait()
        except RuntimeError as err:
            raise self._comm._failed(err, self._what) from None
        self._done = True
        self._keep = None

    def done(self) -> bool:
        return self._done or bool(self._work.is_completed())


class GlooCommunicator(Communicator):
    """Gloo collectives on numpy buffers, over the TCP connections Gloo opens itself.

    ``store`` is a ``torch.distributed`` store shared by the ranks (Gloo publishes its
    addresses there); ``address`` is the local interface address the others can reach.
    """

    def __init__(self, store: Any, rank: int, size: int, timeout: float, address: str,
                 prefix: str = "gloo") -> None:
        dist = import_torch_distributed()
        import torch

        self._torch = torch
        self._dist = dist
        self.rank, self.size, self.timeout = rank, size, timeout
        self._broken: str | None = None
        gloo = dist.ProcessGroupGloo
        options = gloo._Options()
        options._devices = [gloo.create_device(hostname=address)]
        options._timeout = timedelta(seconds=timeout)
        options._threads = 2  # two collectives in flight: one bucket sends while one sums
        try:
            self._pg = gloo(dist.PrefixStore(prefix, store), rank, size, options)
        except RuntimeError as err:
            raise DistributedError(explain(err, rank, size, "connecting the ranks (Gloo)",
                                           timeout)) from None

    def _failed(self, err: BaseException, what: str) -> DistributedError:
        self._broken = explain(err, self.rank, self.size, what, self.timeout)
        return DistributedError(self._broken)

    def _tensor(self, buf: Any) -> Any:
        _check_buffer(buf)
        return self._torch.from_numpy(buf.reshape(-1) if buf.ndim != 1 else buf)

    def _start(self, what: str, launch: Any, keep: Any) -> Work:
        if self._broken is not None:
            raise DistributedError(f"{self._broken} (an earlier collective failed; the "
                                   f"communicator cannot be used any more)")
        try:
            work = launch()
        except RuntimeError as err:
            raise self._failed(err, what) from None
        return _GlooWork(self, work, what, keep)

    def allreduce(self, buf: Any) -> Work:
        tensor = self._tensor(buf)
        return self._start("allreduce", lambda: self._pg.allreduce([tensor]), (buf, tensor))

    def broadcast(self, buf: Any, root: int = 0) -> Work:
        tensor = self._tensor(buf)
        opts = self._dist.BroadcastOptions()
        opts.rootRank = root
        opts.rootTensor = 0
        return self._start("broadcast", lambda: self._pg.broadcast([tensor], opts),
                           (buf, tensor))

    def allgather(self, send: Any, recv: Any) -> Work:
        if recv.shape != (self.size,) + send.shape:
            raise ValueError(f"allgather needs recv of shape {(self.size,) + send.shape}, "
                             f"got {recv.shape}")
        _check_buffer(recv)
        source = self._tensor(send)
        outs = [self._tensor(recv[r]) for r in range(self.size)]
        return self._start("allgather", lambda: self._pg.allgather([outs], [source]),
                           (send, recv, source, outs))

    def barrier(self) -> None:
        self._start("barrier", lambda: self._pg.barrier(), None).wait()

    def close(self) -> None:
        self._broken = self._broken or "the communicator was closed"
        pg, self._pg = getattr(self, "_pg", None), None
        if pg is not None and hasattr(pg, "shutdown"):
            try:
                pg.shutdown()
            except RuntimeError:
                pass  # a broken group may refuse a clean shutdown; it is dropped either way
