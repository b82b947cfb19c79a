"""KVStore on one machine: cpu(0..3) stand in for four GPUs (MXNet test_kvstore.py cases)."""

from __future__ import annotations

import io

import numpy as np
import pytest

import engine as mx
from engine import kvstore, nd
from engine import optimizer as opt

SHAPE = (4, 4)
DEVICES = [mx.cpu(i) for i in range(4)]


def _ones_on_devices(value: float = 1.0) -> list:
    return [nd.full(SHAPE, value, ctx=ctx) for ctx in DEVICES]


@pytest.mark.parametrize("kind", ["local", "device"])
def test_push_sums_across_devices_and_pull_broadcasts(kind: str) -> None:
    kv = kvstore.create(kind)
    kv.init(3, nd.zeros(SHAPE))
    kv.push(3, _ones_on_devices())
    outs = [nd.zeros(SHAPE, ctx=ctx) for ctx in DEVICES]
    kv.pull(3, out=outs)
    for out in outs:
        assert out.context in DEVICES
        assert np.array_equal(out.asnumpy(), np.full(SHAPE, 4.0))


def test_updater_accumulates_four_pushes_to_sixteen() -> None:
    kv = kvstore.create("device")
    kv.init("w", nd.zeros(SHAPE))

    def updater(key, recv, local):
        local += recv

    kv._set_updater(updater)
    for _ in range(4):
        kv.push("w", _ones_on_devices())
    out = nd.zeros(SHAPE)
    kv.pull("w", out=out)
    assert np.array_equal(out.asnumpy(), np.full(SHAPE, 16.0))


def test_pushpull_list_of_keys_and_in_place_default() -> None:
    kv = kvstore.create("local")
    kv.init([0, 1], [nd.zeros((2,)), nd.zeros((3,))])
    grads = [[nd.ones((2,), ctx=c) for c in DEVICES[:2]], [nd.ones((3,), ctx=c) * 2
                                                          for c in DEVICES[:2]]]
    kv.pushpull([0, 1], grads)
    assert grads[0][1].asnumpy().tolist() == [2.0, 2.0]
    assert grads[1][0].asnumpy().tolist() == [4.0, 4.0, 4.0]


def test_key_errors() -> None:
    kv = kvstore.create("local")
    kv.init(0, nd.zeros((2,)))
    with pytest.raises(ValueError, match="duplicate init of key 0"):
        kv.init(0, nd.zeros((2,)))
    with pytest.raises(ValueError, match="mix int and str"):
        kv.init("a", nd.zeros((2,)))
    with pytest.raises(ValueError, match="not been initialized"):
        kv.push(7, nd.zeros((2,)))
    with pytest.raises(ValueError, match="shape"):
        kv.push(0, nd.zeros((3,)))


def test_set_optimizer_shares_the_optimizer_object() -> None:
    kv = kvstore.create("device")
    sgd = opt.SGD(learning_rate=1.0)
    kv.set_optimizer(sgd)
    kv.init(0, nd.zeros((2,)))
    kv.push(0, [nd.ones((2,), ctx=c) for c in DEVICES[:2]])
    out = nd.zeros((2,))
    kv.pull(0, out=out)
    assert out.asnumpy().tolist() == [-2.0, -2.0]
    sgd.set_learning_rate(0.5)  # seen by the store: same object
    kv.push(0, [nd.ones((2,), ctx=c) for c in DEVICES[:2]])
    kv.pull(0, out=out)
    assert out.asnumpy().tolist() == [-3.0, -3.0]


def test_two_bit_compression_with_error_feedback() -> None:
    """MXNet's dist_sync cases on one machine: .4 → 0, then .1 → θ, .2 → 0, .3 → θ per device."""
    kv = kvstore.create("device")
    kv.set_gradient_compression({"type": "2bit", "threshold": 0.5})
    kv.init(0, nd.zeros(SHAPE))
    out = nd.zeros(SHAPE)
    expected = []
    for value, sent in [(0.4, 0.0), (0.1, 0.5), (0.2, 0.0), (0.3, 0.5)]:
        kv.push(0, _ones_on_devices(value))
        kv.pull(0, out=out)
        expected.append(sent * len(DEVICES))
        assert np.allclose(out.asnumpy(), sent * len(DEVICES)), (value, out.asnumpy()[0, 0])
    neg = kvstore.create("device")
    neg.set_gradient_compression({"type": "2bit", "threshold": 0.5})
    neg.init(0, nd.zeros((3,)))
    neg.push(0, [nd.array([-0.7, 0.6, 0.0])])
    result = nd.zeros((3,))
    neg.pull(0, out=result)
    assert result.asnumpy().tolist() == [-0.5, 0.5, 0.0]


def test_compression_residual_is_per_device() -> None:
    kv = kvstore.create("device")
    kv.set_gradient_compression({"type": "2bit", "threshold": 1.0})
    kv.init(0, nd.zeros((1,)))
    out = nd.zeros((1,))
    kv.push(0, [nd.array([0.6], ctx=DEVICES[0]), nd.array([0.0], ctx=DEVICES[1])])
    kv.push(0, [nd.array([0.0], ctx=DEVICES[0]), nd.array([0.6], ctx=DEVICES[1])])
    kv.pull(0, out=out)
    assert out.asnumpy().tolist() == [0.0]  # neither device alone crossed the threshold
    kv.push(0, [nd.array([0.6], ctx=DEVICES[0]), nd.array([0.0], ctx=DEVICES[1])])
    kv.pull(0, out=out)
    assert out.asnumpy().tolist() == [1.0]


def test_compression_errors() -> None:
    with pytest.raises(ValueError, match="not supported for this type of kvstore"):
        kvstore.create("local").set_gradient_compression({"type": "2bit", "threshold": 0.5})
    kv = kvstore.create("device")
    with pytest.raises(ValueError, match="threshold"):
        kv.set_gradient_compression({"type": "2bit", "threshold": 0})
    with pytest.raises(ValueError, match="Unsupported type"):
        kv.set_gradient_compression({"type": "4bit"})


def test_create_types_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    kv = kvstore.create("device")
    assert (kv.type, kv.rank, kv.num_workers) == ("device", 0, 1)
    assert kv.is_capable(kvstore.KVStoreBase.OPTIMIZER)
    assert kvstore.create(kv) is kv
    assert mx.kv.create("teststore").is_capable("optimizer") is False
    for var in ("DMLC_PS_ROOT_URI", "DMLC_NUM_WORKER", "MASTER_ADDR"):
        monkeypatch.delenv(var, raising=False)
    # outside a launcher a dist store cannot find its peers: the error says how to launch
    with pytest.raises(RuntimeError, match="engine.launch -n N"):
        kvstore.create("dist_sync")
    with pytest.raises(NotImplementedError, match="horovod"):
        kvstore.create("horovod")
    with pytest.raises(ValueError, match="Unknown KVStore type"):
        kvstore.create("bogus")


def test_teststore_sums_and_broadcasts() -> None:
    store = kvstore.create("teststore")
    values = [nd.ones((2,), ctx=c) for c in DEVICES[:3]]
    store.pushpull(0, values)
    assert all(v.asnumpy().tolist() == [3.0, 3.0] for v in values)


def test_row_sparse_pull_copies_requested_rows() -> None:
    kv = kvstore.create("local")
    kv.init(0, nd.array(np.arange(6, dtype=np.float32).reshape(3, 2)))
    out = nd.ones((3, 2))
    kv.row_sparse_pull(0, out=out, row_ids=nd.array([2, 0]))
    assert out.asnumpy().tolist() == [[0, 1], [0, 0], [4, 5]]


def test_optimizer_states_save_and_load_without_pickle(tmp_path) -> None:
    kv = kvstore.create("device")
    kv.set_optimizer(opt.Adam(learning_rate=0.1))
    kv.init(0, nd.ones((3,)))
    kv.push(0, [nd.ones((3,))])
    kv.save_optimizer_states(str(tmp_path / "kv.states"))
    buffer = io.BytesIO()
    kv.save_optimizer_states(buffer, dump_optimizer=True)
    other = kvstore.create("device")
    other.set_optimizer(opt.Adam(learning_rate=0.1))
    other.init(0, nd.ones((3,)))
    other.load_optimizer_states(str(tmp_path / "kv.states"))
    m, v = other._updater.states[0]
    assert np.allclose(m.asnumpy(), 0.1)
    buffer.seek(0)
    other.load_optimizer_states(buffer)
    assert other._optimizer.num_update == 1


def test_teststore_is_reached_by_name_only_as_in_mxnet() -> None:
    """MXNet 1.9.1 registers 'teststore' but does not export TestStore from mxnet.kvstore."""
    assert not hasattr(kvstore, "TestStore")
    assert "TestStore" not in kvstore.__all__
    assert type(kvstore.create("TestStore")).__name__ == "TestStore"
