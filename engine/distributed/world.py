"""The process's membership in a distributed job: the ranks met, the communicators open.

:func:`init` meets the other ranks once per process (or once per generation: the service
calls :func:`shutdown` after a failure and ``init`` again with the new address). Rank 0
hosts a ``torch.distributed.TCPStore`` at the rendezvous address; the others connect to
it, and Gloo publishes its connection details there. The store is kept open so a GPU
communicator (NCCL) can be joined later through it.
"""

from __future__ import annotations

import atexit
import logging
import threading
from datetime import timedelta
from typing import Any

from .comm import Communicator, DistributedError, GlooCommunicator, import_torch_distributed
from .rendezvous import Rendezvous, RendezvousError, can_listen, from_env, local_address_towards

_RANK_COUNTER = "rudder/next-rank"
log = logging.getLogger(__name__)


def _has_nccl() -> bool:
    try:
        from cupy.cuda import nccl  # noqa: F401
    except ImportError:
        return False
    return True


class World:
    """This process's rank among ``size``, with a Gloo communicator for host arrays."""

    def __init__(self, rendezvous: Rendezvous) -> None:
        dist = import_torch_distributed()
        self.rendezvous = rendezvous
        self.timeout = rendezvous.timeout
        self.size = rendezvous.world_size
        self.store, self.rank = _meet(dist, rendezvous)
        address = local_address_towards(rendezvous.host, rendezvous.port)
        self.cpu: Communicator = GlooCommunicator(self.store, self.rank, self.size,
                                                  self.timeout, address)
        self._gpu: dict[int, Communicator] = {}

    def communicator_for(self, raw: Any) -> Communicator:
        """The communicator for arrays like ``raw``: Gloo for numpy, NCCL for cupy."""
        from ..backend import array_module

        xp = array_module(raw)
        if xp.__name__ == "numpy":
            return self.cpu
        device = int(raw.device.id)
        comm = self._gpu.get(device)
        if comm is None:
            with xp.cuda.Device(device):
                if self._needs_staging(xp, device):
                    from .staged import HostStagedCommunicator

                    log.warning("rank %d of %d: the ranks do not each have a GPU of their "
                                "own (or cupy has no NCCL); GPU arrays reduce through host "
                                "memory", self.rank, self.size)
                    comm = HostStagedCommunicator(self.cpu)
                else:
                    from .nccl import NcclCommunicator

                    comm = NcclCommunicator(self.store, self.rank, self.size, self.timeout,
                                            prefix=f"nccl/{device}")
            self._gpu[device] = comm
        return comm

    def _needs_staging(self, xp: Any, device: int) -> bool:
        """Whether GPU arrays must go through host memory: two ranks train on one GPU
        (NCCL refuses that) or a rank's cupy has no NCCL. Decided from what every rank
        publishes through the store (its device's PCI bus id, whether it has NCCL), so all
        ranks choose alike."""
        if self.size == 1:
            return not _has_nccl()
        keys = [f"gpu-layout/{device}/{rank}" for rank in range(self.size)]
        mine = f"{xp.cuda.Device(device).pci_bus_id}|{int(_has_nccl())}"
        self.store.set(keys[self.rank], mine.encode())
        self.store.wait(keys)
        layouts = [bytes(self.store.get(key)).decode() for key in keys]
        buses = {layout.rsplit("|", 1)[0] for layout in layouts}
        return len(buses) < self.size or any(layout.endswith("|0") for layout in layouts)

    def close(self) -> None:
        for comm in self._gpu.values():
            comm.close()
        self._gpu.clear()
        self.cpu.close()
        # The store last: on rank 0 it is the server the other ranks' groups were built on.
        self.store = None


def _meet(dist: Any, rdv: Rendezvous) -> tuple[Any, int]:
    """Connect to (or host) the store; (store, rank)."""
    wait = timedelta(seconds=rdv.timeout)
    where = f"{rdv.host}:{rdv.port}"
    rank = rdv.rank
    if rank is None and can_listen(rdv.host, rdv.port):
        try:  # no rank given: whoever can listen on rank 0's address becomes rank 0
            store = dist.TCPStore(rdv.host, rdv.port, rdv.world_size, True, wait,
                                  wait_for_workers=False)
            return store, 0
        except RuntimeError:
            pass  # another process was faster: join it as a client
    try:
        if rank == 0:
            store = dist.TCPStore(rdv.host, rdv.port, rdv.world_size, True, wait,
                                  wait_for_workers=False)
        else:
            store = dist.TCPStore(rdv.host, rdv.port, None, False, wait)
    except RuntimeError as err:
        text = str(err).strip().splitlines()[0]
        if rank == 0:
            raise RendezvousError(f"rank 0 cannot listen on {where}: {text}") from None
        raise RendezvousError(f"rank {'?' if rank is None else rank} could not reach rank 0 "
                              f"at {where} within {rdv.timeout:g} s: {text}") from None
    if rank is None:
        rank = int(store.add(_RANK_COUNTER, 1))  # 1, 2, ...: rank 0 is the host
        if rank >= rdv.world_size:
            raise RendezvousError(f"more than {rdv.world_size} workers joined {where}")
    return store, rank


_lock = threading.Lock()
_current: World | None = None
_exit_hook_registered = False


def init(rendezvous: Rendezvous | None = None) -> World:
    """Join the job (from the launch environment when ``rendezvous`` is None); idempotent."""
    global _current, _exit_hook_registered
    with _lock:
        if _current is not None:
            if rendezvous is not None and rendezvous != _current.rendezvous:
                raise RendezvousError("this process already joined another distributed job; "
                                      "call engine.distributed.shutdown() first")
            return _current
        _current = World(rendezvous if rendezvous is not None else from_env())
        if not _exit_hook_registered:
            # Gloo's worker threads must be joined before the interpreter tears down: left
            # to static destructors at exit, a still-joinable std::thread aborts the process
            # ("terminate called without an active exception", exit status 134) after the
            # script itself has finished cleanly.
            atexit.register(shutdown)
            _exit_hook_registered = True
        return _current


def current() -> World | None:
    """The joined world, or None."""
    return _current


def shutdown() -> None:
    """Leave the job: close the communicators (a later :func:`init` joins anew)."""
    global _current
    with _lock:
        world, _current = _current, None
    if world is not None:
        world.close()


__all__ = ["DistributedError", "World", "current", "init", "shutdown"]
