"""Where the ranks of a job meet: who they are, how many, and the rank-0 address.

A :class:`Rendezvous` is plain data (rank, world size, the host and port rank 0 listens on,
the collective timeout). :func:`from_env` reads it the way MXNet's launchers and PyTorch's
hand it out:

- MXNet's ``tools/launch.py`` (``DMLC_ROLE=worker``, ``DMLC_PS_ROOT_URI``/``_PORT``,
  ``DMLC_NUM_WORKER``, and ``DMLC_TASK_ID`` from its local launcher);
- ``MASTER_ADDR``/``MASTER_PORT``/``RANK``/``WORLD_SIZE`` (torchrun and friends);
- ``RUDDER_DIST_TIMEOUT``: seconds a collective may wait for the others (default 60).

Anything else (the service, which agrees the address through Redis under its job id and
generation) builds a ``Rendezvous`` itself and passes it to :func:`engine.distributed.init`.

>>> from engine.distributed import Rendezvous
>>> Rendezvous(rank=1, world_size=2, host="10.0.0.5", port=29500).is_host
False
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_TIMEOUT = 60.0


class RendezvousError(RuntimeError):
    """The ranks could not meet (bad environment, unreachable rank 0, a timeout)."""


@dataclass(frozen=True)
class Rendezvous:
    """One rank's view of the job: ``rank`` of ``world_size``, rank 0 at ``host:port``.

    ``rank`` may be None when the launcher hands out none (some of MXNet's launchers): the
    first process that can listen on ``host:port`` becomes rank 0 and the others take the
    next free numbers from it. ``timeout`` bounds every wait: the meeting itself and each
    collective afterwards.
    """

    rank: int | None
    world_size: int
    host: str
    port: int
    timeout: float = DEFAULT_TIMEOUT

    def __post_init__(self) -> None:
        if self.world_size < 1:
            raise RendezvousError(f"world size must be >= 1, got {self.world_size}")
        if self.rank is not None and not 0 <= self.rank < self.world_size:
            raise RendezvousError(f"rank {self.rank} is outside 0..{self.world_size - 1}")
        if not 0 < self.port < 65536:
            raise RendezvousError(f"port must be in 1..65535, got {self.port}")
        if not self.timeout > 0:
            raise RendezvousError(f"timeout must be > 0 seconds, got {self.timeout}")

    @property
    def is_host(self) -> bool:
        """Whether this rank runs the meeting point (rank 0)."""
        return self.rank == 0


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise RendezvousError(f"{name}={env[name]!r} is not an integer") from None


def timeout_from_env(env: Mapping[str, str] | None = None) -> float:
    """``RUDDER_DIST_TIMEOUT`` in seconds, or the default (60)."""
    env = os.environ if env is None else env
    raw = env.get("RUDDER_DIST_TIMEOUT")
    if raw in (None, ""):
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise RendezvousError(f"RUDDER_DIST_TIMEOUT={raw!r} is not a number of seconds") \
            from None
    if not value > 0:
        raise RendezvousError(f"RUDDER_DIST_TIMEOUT must be > 0, got {raw!r}")
    return value


def from_env(env: Mapping[str, str] | None = None) -> Rendezvous:
    """The rendezvous described by MXNet's (``DMLC_*``) or PyTorch's launch variables."""
    env = os.environ if env is None else env
    timeout = timeout_from_env(env)
    if "DMLC_PS_ROOT_URI" in env or "DMLC_NUM_WORKER" in env:
        missing = [n for n in ("DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "DMLC_NUM_WORKER")
                   if not env.get(n)]
        if missing:
            raise RendezvousError(f"distributed training needs {', '.join(missing)} (MXNet's "
                                  f"launcher sets them; see `python -m engine.launch`)")
        role = env.get("DMLC_ROLE", "worker")
        if role != "worker":
            raise RendezvousError(f"DMLC_ROLE={role!r}: only workers train")
        rank = _int(env, "DMLC_TASK_ID") if env.get("DMLC_TASK_ID") else None
        return Rendezvous(rank, _int(env, "DMLC_NUM_WORKER"), env["DMLC_PS_ROOT_URI"],
                          _int(env, "DMLC_PS_ROOT_PORT"), timeout)
    if "MASTER_ADDR" in env:
        missing = [n for n in ("MASTER_PORT", "WORLD_SIZE") if not env.get(n)]
        if missing:
            raise RendezvousError(f"distributed training needs {', '.join(missing)} next "
                                  f"to MASTER_ADDR")
        rank = _int(env, "RANK") if env.get("RANK") else None
        return Rendezvous(rank, _int(env, "WORLD_SIZE"), env["MASTER_ADDR"],
                          _int(env, "MASTER_PORT"), timeout)
    raise RendezvousError(
        "a dist kvstore needs to know its peers: run the script under MXNet's "
        "tools/launch.py, `python -m engine.launch -n N script.py`, or set "
        "DMLC_PS_ROOT_URI/DMLC_PS_ROOT_PORT/DMLC_NUM_WORKER/DMLC_TASK_ID "
        "(or MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK)")


def local_address_towards(host: str, port: int) -> str:
    """The address of this machine's interface that reaches ``host`` (its route's source).

    Gloo must listen on an address the other ranks can reach; the hostname's address is
    wrong on multi-homed machines and in network namespaces, while the route to rank 0
    is what every rank already proved it can use.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    except socket.gaierror as err:
        raise RendezvousError(f"cannot resolve rank 0's host {host!r}: {err}") from None
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(address)  # UDP: picks the route, sends nothing
        except OSError as err:
            raise RendezvousError(f"no route to rank 0 at {host}:{port}: {err}") from None
        return str(probe.getsockname()[0])


def can_listen(host: str, port: int) -> bool:
    """Whether ``host:port`` is an address of this machine with the port free."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror:
        return False
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as err:
            if err.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
                return False
            raise
    return True
