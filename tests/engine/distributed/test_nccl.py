"""NCCL (cupy.cuda.nccl) behind the same kvstore: GPU arrays reduce on the device.

Runs only where a CUDA GPU and cupy are present (marker ``gpu``): one rank, so NCCL's
unique-id exchange through the store, its communicator and each collective are exercised
on the one device this project's GPU machines have; then two ranks training on it, which
NCCL refuses (a device per rank), so they reduce through host memory.
"""

from __future__ import annotations

from pathlib import Path

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


def test_two_ranks_on_one_gpu_reduce_through_host_memory_and_match_one_rank(
        tmp_path: Path) -> None:
    """Two processes train shards of each batch on gpu(0) with 'dist_device_sync' and end
    where one process on the whole batch ends, within float32 rounding. NCCL refuses two
    ranks on one device (NCCL_ERROR_INVALID_USAGE), so the world sees the shared GPU and
    reduces through host memory."""
    from tests.engine.distributed import launching
    from tests.engine.distributed.test_training import SCRIPT, assert_same_weights, reference

    args = ["--net", "cnn", "--optimizer", "adam", "--update-on-kvstore", "0", "--ctx", "gpu"]
    done = launching.engine_launch(2, SCRIPT, str(tmp_path / "two"), *args,
                                   "--kvstore", "dist_device_sync", timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ranks = [launching.load(tmp_path / "two" / f"rank{r}.npz") for r in range(2)]
    assert_same_weights(ranks, reference(tmp_path / "one", args))
    assert [launching.facts(s)["gpu_communicators"] for s in ranks] == [
        ["HostStagedCommunicator"]] * 2
