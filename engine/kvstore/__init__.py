"""Key-value stores for multi-device training (``mxnet.kvstore``, also ``engine.kv``).

>>> import engine as mx
>>> kv = mx.kvstore.create("device")
>>> kv.type, kv.rank, kv.num_workers
('device', 0, 1)
"""

from __future__ import annotations

from .base import KVStoreBase, create
from .compression import TwoBitCompression
from .local import KVStore
from .teststore import TestStore as _TestStore  # registers 'teststore' (not exported, as in MXNet)

__all__ = ["KVStore", "KVStoreBase", "TwoBitCompression", "create"]
