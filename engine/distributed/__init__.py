"""Data-parallel training over several processes (MXNet's ``dist_*`` kvstores).

The ranks meet once (:func:`init`, from the launch environment by default), then reduce
through an existing collective library: Gloo via ``torch.distributed`` for host arrays,
NCCL via ``cupy.cuda.nccl`` for GPU arrays. Scripts rarely call this module: creating
``mx.kv.create('dist_sync')`` or a ``gluon.Trainer(..., kvstore='dist_sync')`` joins.
It needs Rudder's ``dist`` extra (torch, CPU build).

- :class:`Rendezvous` / :func:`rendezvous_from_env`: who this rank is and where rank 0 is;
- :func:`init`, :func:`current`, :func:`shutdown`: join and leave (one job per process);
- :class:`DistributedError`: a collective failed (a rank died, stopped or is unreachable);
- :func:`shard`: this rank's part of a data set for one epoch.
"""

from __future__ import annotations

from .comm import DistributedError
from .rendezvous import Rendezvous, RendezvousError
from .rendezvous import from_env as rendezvous_from_env
from .sharding import shard
from .world import World, current, init, shutdown

__all__ = ["DistributedError", "Rendezvous", "RendezvousError", "World", "current", "init",
           "rendezvous_from_env", "shard", "shutdown"]
