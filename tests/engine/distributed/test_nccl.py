"""NCCL (cupy.cuda.nccl) behind the same kvstore: GPU arrays reduce on the device.

Runs only where a CUDA GPU and cupy are present (marker ``gpu``): one rank, so NCCL's
unique-id exchange through the store, its communicator and each collective are exercised
on the one device this project's GPU machines have.
"""

from __future__ import annotations

import numpy as np
import pytest

import engine as mx
from engine import backend

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(backend.gpu_count() == 0, reason="needs cupy and a CUDA GPU"),
]


@pytest.fixture
def world():
    from engine import distributed
    from engine.launch import free_port

    joined = distributed.init(distributed.Rendezvous(0, 1, "127.0.0.1", free_port(), 30.0))
    yield joined
    distributed.shutdown()


def test_gpu_arrays_go_through_nccl(world) -> None:
    from engine.distributed.nccl import NcclCommunicator

    cupy = backend.cupy
    buf = cupy.arange(6, dtype=cupy.float32)
    comm = world.communicator_for(buf)
    assert isinstance(comm, NcclCommunicator)
    comm.allreduce(buf).wait()
    comm.broadcast(buf).wait()
    recv = cupy.empty((1, 6), dtype=cupy.float32)
    comm.allgather(buf, recv).wait()
    np.testing.assert_array_equal(cupy.asnumpy(recv[0]), np.arange(6))
    comm.barrier()


def test_dist_device_sync_store_on_the_gpu(world) -> None:
    from engine.kvstore.dist import DistKVStore

    kv = DistKVStore("dist_device_sync", world=world)
    ctx = mx.gpu(0)
    kv.init(0, mx.nd.ones((3,), ctx=ctx))
    kv.push(0, [mx.nd.ones((3,), ctx=ctx) * 2])
    out = mx.nd.zeros((3,), ctx=ctx)
    kv.pull(0, out=out)
    assert out.context == ctx
    np.testing.assert_array_equal(out.asnumpy(), [2.0, 2.0, 2.0])
