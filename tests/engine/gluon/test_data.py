"""gluon.data: datasets, samplers, DataLoader batching, last_batch modes, and the seeded
(seed, epoch) → order contract the service relies on to resume mid-epoch."""

import numpy as np
import pytest

import engine
from engine import nd
from engine.gluon.data import (
    ArrayDataset,
    BatchSampler,
    DataLoader,
    RandomSampler,
    SequentialSampler,
    SimpleDataset,
)

X = np.arange(20, dtype=np.float32).reshape(10, 2)
Y = np.arange(10)


def test_array_dataset_and_transforms():
    ds = ArrayDataset(X, Y)
    assert len(ds) == 10
    x, y = ds[3]
    np.testing.assert_array_equal(x, [6, 7])
    assert y == 3
    doubled = ds.transform_first(lambda x: x * 2)
    assert doubled[3][0].tolist() == [12, 14] and doubled[3][1] == 3
    swapped = ds.transform(lambda x, y: (y, x))
    assert swapped[1][0] == 1
    assert len(ds.filter(lambda s: s[1] % 2 == 0)) == 5
    assert [s[1] for s in ds.shard(3, 0)] == [0, 1, 2, 3]
    assert len(ds.take(4)) == 4
    with pytest.raises(ValueError, match="same length"):
        ArrayDataset(X, Y[:5])


def test_loader_yields_ndarray_batches_in_order():
    loader = DataLoader(ArrayDataset(X, Y), batch_size=4)
    batches = list(loader)
    assert len(loader) == 3 and len(batches) == 3
    data, label = batches[0]
    assert isinstance(data, nd.NDArray) and data.dtype == np.float32 and data.shape == (4, 2)
    np.testing.assert_array_equal(label.asnumpy(), [0, 1, 2, 3])
    np.testing.assert_array_equal(batches[-1][1].asnumpy(), [8, 9])


def test_loader_keeps_ndarray_dtype_and_context():
    ds = ArrayDataset(nd.array(X, ctx=engine.cpu(1)), nd.array(Y, ctx=engine.cpu(1)))
    assert ds[2][1] == 2.0  # a scalar sample, as MXNet gives for 1-D arrays
    data, label = next(iter(DataLoader(ds, batch_size=4)))
    assert data.context == engine.cpu(1) and label.context == engine.cpu(1)
    np.testing.assert_array_equal(label.asnumpy(), [0, 1, 2, 3])


def test_loader_over_ndarrays_and_plain_datasets_agree():
    bulk = [b[0].asnumpy() for b in DataLoader(ArrayDataset(nd.array(X), Y), batch_size=3)]
    per_sample = [b[0].asnumpy() for b in
                  DataLoader(SimpleDataset(list(zip(X, Y, strict=True))), batch_size=3)]
    for a, b in zip(bulk, per_sample, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("mode,sizes", [("keep", [4, 4, 2]), ("discard", [4, 4])])
def test_last_batch_keep_and_discard(mode, sizes):
    loader = DataLoader(ArrayDataset(X, Y), batch_size=4, last_batch=mode)
    assert [b[1].shape[0] for b in loader] == sizes
    assert len(loader) == len(sizes)


def test_last_batch_rollover_carries_samples_into_next_epoch():
    loader = DataLoader(ArrayDataset(X, Y), batch_size=4, last_batch="rollover")
    first = [b[1].asnumpy().tolist() for b in loader]
    second = [b[1].asnumpy().tolist() for b in loader]
    assert first == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert second == [[8, 9, 0, 1], [2, 3, 4, 5], [6, 7, 8, 9]]


def test_shuffle_covers_every_sample_and_follows_engine_seed():
    engine.random.seed(3)
    a = np.concatenate([b[1].asnumpy() for b in DataLoader(ArrayDataset(X, Y), 3, shuffle=True)])
    engine.random.seed(3)
    b = np.concatenate([b[1].asnumpy() for b in DataLoader(ArrayDataset(X, Y), 3, shuffle=True)])
    assert sorted(a.tolist()) == list(range(10)) and a.tolist() == b.tolist()
    assert a.tolist() != list(range(10))


def test_seeded_order_is_a_pure_function_of_seed_and_epoch():
    def epoch_labels(loader, epoch):
        loader.set_epoch(epoch)
        return [b[1].asnumpy().tolist() for b in loader]

    loader = DataLoader(ArrayDataset(X, Y), batch_size=4, shuffle=True, seed=11)
    epochs = [epoch_labels(loader, e) for e in range(3)]
    assert epochs[0] != epochs[1]
    resumed = DataLoader(ArrayDataset(X, Y), batch_size=4, shuffle=True, seed=11)
    assert epoch_labels(resumed, 2) == epochs[2]
    assert epoch_labels(resumed, 0) == epochs[0]
    # iterating without set_epoch moves to the next epoch by itself
    fresh = DataLoader(ArrayDataset(X, Y), batch_size=4, shuffle=True, seed=11)
    assert [[b[1].asnumpy().tolist() for b in fresh] for _ in range(2)] == epochs[:2]


def test_seeded_rollover_resume_matches_uninterrupted_run():
    sampler = RandomSampler(10, seed=5)
    straight = BatchSampler(sampler, 4, "rollover")
    run = [list(straight) for _ in range(4)]
    resumed = BatchSampler(RandomSampler(10, seed=5), 4, "rollover")
    resumed.set_epoch(3)
    assert list(resumed) == run[3]


def test_loader_argument_errors_and_custom_batchify():
    ds = ArrayDataset(X, Y)
    with pytest.raises(ValueError, match="batch_size must be specified"):
        DataLoader(ds)
    with pytest.raises(ValueError, match="shuffle must not be specified"):
        DataLoader(ds, 2, shuffle=True, sampler=SequentialSampler(10))
    with pytest.raises(ValueError, match="last_batch must be one of"):
        DataLoader(ds, 2, last_batch="sometimes")
    sums = DataLoader(ds, 5, batchify_fn=lambda samples: sum(s[1] for s in samples))
    assert list(sums) == [10, 35]
    loader = DataLoader(ds, batch_sampler=BatchSampler(SequentialSampler(10), 5), num_workers=2)
    assert len(list(loader)) == 2
