"""The parts of distributed training that need no second process: where ranks meet, how a
data set is split, the 2-bit wire format, the bucket plan, the launcher's environment."""

from __future__ import annotations

import numpy as np
import pytest

from engine import nd
from engine.distributed import RendezvousError, rendezvous_from_env, shard
from engine.distributed.reducer import FIRST_BUCKET_BYTES, _plan
from engine.kvstore.compression import TwoBitCompression, decode_sum, wire_bytes
from engine.launch import parse_args, rank_env
from engine.optimizer.flat import FlatGroup

DMLC = {"DMLC_ROLE": "worker", "DMLC_PS_ROOT_URI": "10.1.2.3", "DMLC_PS_ROOT_PORT": "9091",
        "DMLC_NUM_WORKER": "4", "DMLC_NUM_SERVER": "4", "DMLC_TASK_ID": "2"}


def test_mxnet_launcher_environment_names_rank_world_and_rank0_address() -> None:
    rdv = rendezvous_from_env(DMLC)
    assert (rdv.rank, rdv.world_size, rdv.host, rdv.port, rdv.timeout) == \
        (2, 4, "10.1.2.3", 9091, 60.0)
    # a launcher without task ids: the rank is found when the ranks meet
    assert rendezvous_from_env({k: v for k, v in DMLC.items() if k != "DMLC_TASK_ID"}).rank \
        is None
    torchrun = {"MASTER_ADDR": "h", "MASTER_PORT": "1", "WORLD_SIZE": "2", "RANK": "1",
                "RUDDER_DIST_TIMEOUT": "5"}
    assert rendezvous_from_env(torchrun) == type(rdv)(1, 2, "h", 1, 5.0)


@pytest.mark.parametrize(("env", "message"), [
    ({}, "engine.launch -n N"),
    ({**DMLC, "DMLC_NUM_WORKER": ""}, "DMLC_NUM_WORKER"),
    ({**DMLC, "DMLC_TASK_ID": "4"}, "rank 4 is outside 0..3"),
    ({**DMLC, "DMLC_PS_ROOT_PORT": "x"}, "DMLC_PS_ROOT_PORT='x' is not an integer"),
    ({**DMLC, "RUDDER_DIST_TIMEOUT": "0"}, "RUDDER_DIST_TIMEOUT must be > 0"),
    ({**DMLC, "DMLC_ROLE": "server"}, "only workers train"),
])
def test_a_bad_launch_environment_says_what_is_wrong(env: dict, message: str) -> None:
    with pytest.raises(RendezvousError, match=message):
        rendezvous_from_env(env)


def test_shards_are_disjoint_cover_the_data_and_depend_on_seed_and_epoch_only() -> None:
    parts = [shard(103, r, 4, seed=5, epoch=2) for r in range(4)]
    together = np.concatenate(parts)
    assert sorted(together.tolist()) == list(range(103))
    assert [len(p) for p in parts] == [26, 26, 26, 25]
    again = shard(103, 1, 4, seed=5, epoch=2)
    assert np.array_equal(again, parts[1])
    assert not np.array_equal(shard(103, 1, 4, seed=5, epoch=3), parts[1])
    assert {len(shard(103, r, 4, drop_last=True)) for r in range(4)} == {25}
    assert shard(5, 0, 2, shuffle=False).tolist() == [0, 2, 4]
    with pytest.raises(ValueError, match="outside"):
        shard(10, 2, 2)


def test_two_bit_wire_format_sums_to_what_each_rank_quantized() -> None:
    rng = np.random.default_rng(0)
    ranks = [TwoBitCompression(0.5) for _ in range(3)]
    reference = [TwoBitCompression(0.5) for _ in range(3)]
    for _ in range(4):  # residuals carry over between pushes
        grads = [rng.uniform(-1, 1, 37).astype(np.float32) for _ in range(3)]
        packed = np.stack([c.encode("k", g) for c, g in zip(ranks, grads, strict=True)])
        assert packed.shape == (3, wire_bytes(37)) and wire_bytes(37) == 10  # 2 bits each
        out = np.empty(37, np.float32)
        decode_sum(packed, 37, 0.5, out)
        expected = sum(c.compress("k", 0, g) for c, g in zip(reference, grads, strict=True))
        np.testing.assert_array_equal(out, expected)


def _group(sizes: list[int], order: list[int]) -> FlatGroup:
    from engine.context import cpu

    entries = []
    for index in order:
        data, grad = nd.zeros((sizes[index],)), nd.zeros((sizes[index],))
        entries.append((index, data, grad))
    return FlatGroup(cpu(), entries)


def test_buckets_cover_the_buffer_in_finishing_order_with_a_small_first_one() -> None:
    sizes = [300_000, 100, 500_000, 200, 900_000, 50]  # float32: 1.2 MB, 2 MB, 3.6 MB
    order = [5, 4, 3, 2, 1, 0]
    group = _group(sizes, order)
    buckets = _plan([group], order, cap=4 << 20)
    # [5] alone (the first bucket stops at 1 MiB), then up to 4 MiB each
    assert [b.indices for b in buckets] == [[5], [4, 3], [2, 1, 0]]
    assert (buckets[0].stop - buckets[0].start) * 4 <= FIRST_BUCKET_BYTES
    spans = [(b.start, b.stop) for b in buckets]
    assert spans[0][0] == 0 and spans[-1][1] == group.grad.size
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert [b.indices for b in _plan([group], order, cap=4 << 20)] == \
        [b.indices for b in buckets]  # the same plan on every rank


def test_launcher_gives_each_rank_mxnets_worker_environment() -> None:
    env = rank_env({"PATH": "/bin"}, 1, 3, "127.0.0.1", 4000, 7.5)
    assert env == {"PATH": "/bin", "DMLC_ROLE": "worker", "DMLC_PS_ROOT_URI": "127.0.0.1",
                   "DMLC_PS_ROOT_PORT": "4000", "DMLC_NUM_WORKER": "3", "DMLC_NUM_SERVER": "0",
                   "DMLC_TASK_ID": "1", "RUDDER_DIST_TIMEOUT": "7.5"}
    args = parse_args(["-n", "2", "train.py", "--epochs", "3"])
    assert (args.num_workers, args.world_size, args.script, args.args) == \
        (2, 2, "train.py", ["--epochs", "3"])
    with pytest.raises(SystemExit):
        parse_args(["-n", "2", "--world-size", "4", "--first-rank", "2", "train.py"])  # no port
