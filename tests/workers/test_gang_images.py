"""A distributed job on an uploaded image set (RecordIO), ranks as real processes over Gloo
on loopback: each rank decodes only its part of every global batch; 2 ranks end where
one worker ends (random augmentations included: a sample's draws come from (seed, epoch,
index)), and a stopped run with random augmentations resumes bit-identically."""

from __future__ import annotations

import copy
import json
import multiprocessing
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.jobspec import parse_spec
from core.storage import LocalStore
from tests.services import free_port
from tests.workers.datasets import files
from tests.workers.jobs import ScriptedIO
from workers.checkpoints import latest_complete_checkpoint
from workers.data_sources import StoredDataset

DATASET_ID = "0f4c1d7e-6a52-4b8e-9d2a-3c1e5b7a9f10"  # ids are uuids
SAMPLES = 44  # batches of 8: five full and one of 4 (2 per rank) an epoch
SPEC: dict[str, Any] = {
    "name": "gang-images",
    "model": [{"type": "Dense", "units": 8, "activation": "relu"},
              {"type": "Dense", "units": 2}],
    "data": {"train": {"dataset": DATASET_ID, "transforms": [{"type": "CenterCrop", "size": 6}]},
             "val": {"dataset": DATASET_ID, "transforms": [{"type": "CenterCrop", "size": 6}]},
             "normalize": "auto", "batch_size": 8, "shuffle": True},
    "loss": {"type": "softmax_cross_entropy"},
    "initializer": {"type": "xavier"},
    "optimizer": {"type": "adam", "learning_rate": 0.01},
    "epochs": 2,
    "metrics": ["accuracy"],
    "checkpoint": {"every_steps": 4, "keep_last": 10},
    "seed": 11,
    "device": "cpu",
}
RANDOM = [{"type": "RandomFlipLeftRight"}, {"type": "RandomBrightness", "brightness": 0.4},
          {"type": "CenterCrop", "size": 6}]


def _spec(workers: int, augment: bool) -> dict[str, Any]:
    spec = copy.deepcopy(SPEC)
    spec["resources"] = {"workers": workers}
    if augment:
        spec["data"]["train"]["transforms"] = RANDOM
    return spec


def _upload(root: Path) -> None:
    """A small RecordIO set in the store, as an upload leaves it: a learnable mark."""
    pictures = files.images(SAMPLES, height=8, width=8, seed=4)
    labels = [float(i % 2) for i in range(SAMPLES)]
    for picture, label in zip(pictures, labels, strict=True):
        picture[2:5, 2:5] = 255 if label else 0
    rec, idx = files.recordio([(lab, files.png(p)) for lab, p in zip(labels, pictures,
                                                                      strict=True)])
    store = LocalStore(root)
    store.put(f"datasets/{DATASET_ID}/set.rec", rec)
    store.put(f"datasets/{DATASET_ID}/set.idx", idx)


def _lookup(dataset_id: str) -> StoredDataset:
    assert dataset_id == DATASET_ID
    stored = [{"path": name, "key": f"datasets/{DATASET_ID}/{name}", "size": 0}
              for name in ("set.rec", "set.idx")]
    return StoredDataset(id=DATASET_ID, format="recordio", files=stored, stats=None)


def _report(runner: Any, result: Any, out: str, name: str) -> None:
    np.savez(f"{out}/{name}.npz",
             **{p.name: p.data().asnumpy() for p in runner.trainer.parameters})
    Path(f"{out}/{name}.json").write_text(json.dumps({
        "outcome": result.outcome, "step": result.step,
        "digests": runner.handler.digests if getattr(runner, "handler", None) else []}))


def _rank(rank: int, size: int, port: int, job_id: str, root: str, out: str,
          crash_at: int | None, augment: bool) -> None:
    import engine.distributed
    from workers.gang.handler import NullIO
    from workers.gang.runner import GangRunner

    world = engine.distributed.init(engine.distributed.Rendezvous(
        rank, size, "127.0.0.1", port, timeout=30))
    scripted = ScriptedIO({}, crash_at=crash_at)
    job_io: Any = scripted if rank == 0 else NullIO()
    runner = GangRunner(job_id, _spec(size, augment), LocalStore(root), job_io, world=world,
                        lookup_dataset=_lookup, data_cache=Path(root) / f"cache{rank}")
    scripted.runner = runner
    _report(runner, runner.run(), out, f"rank{rank}")
    engine.distributed.shutdown()


def _run_gang(job_id: str, root: Path, out: Path, *, crash_at: int | None = None,
              augment: bool = False) -> list[dict[str, Any]]:
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_rank, args=(r, 2, port, job_id, str(root), str(out),
                                                     crash_at, augment))
                 for r in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=240)
        assert process.exitcode == 0, f"a rank exited with {process.exitcode}"
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


def _params(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("augment", [False, True], ids=["deterministic", "random"])
def test_two_ranks_on_an_uploaded_image_set_train_what_one_worker_trains(
        tmp_path: Path, augment: bool) -> None:
    from workers.runner import JobRunner

    store = tmp_path / "store"
    _upload(store)
    reports = _run_gang("gang", store, tmp_path / "gang", augment=augment)
    assert [r["outcome"] for r in reports] == ["succeeded", "succeeded"]
    assert reports[0]["step"] == 2 * 6 and len(set(reports[0]["digests"])) == 1

    scripted = ScriptedIO({})
    single = JobRunner("single", _spec(1, augment), LocalStore(store),
                       scripted,  # type: ignore[arg-type]
                       lookup_dataset=_lookup, data_cache=tmp_path / "single-cache")
    scripted.runner = single
    assert single.run().outcome == "succeeded"
    assert single.state.step == 2 * 6
    gang = _params(tmp_path / "gang" / "rank0.npz")
    one = {p.name: p.data().asnumpy() for p in single.trainer.parameters}
    assert gang.keys() == one.keys()
    for name in gang:
        assert not np.array_equal(gang[name], 0 * gang[name]), name
        np.testing.assert_allclose(gang[name], one[name], rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.timeout(300)
def test_a_stopped_gang_with_random_augmentations_resumes_bit_identically(
        tmp_path: Path) -> None:
    store = tmp_path / "store"
    _upload(store)
    whole = _run_gang("whole", store, tmp_path / "whole", augment=True)
    assert whole[0]["outcome"] == "succeeded" and len(set(whole[0]["digests"])) == 1
    # stopped at step 6 without a checkpoint there: the latest is step 4's, mid-epoch 0,
    # so the resumed run skips 4 batches and redraws the rest's augmentations
    first = _run_gang("stopped", store, tmp_path / "first", crash_at=6, augment=True)
    assert [r["outcome"] for r in first] == ["cancelled", "cancelled"]
    latest = latest_complete_checkpoint(LocalStore(store), "stopped")
    assert latest is not None and (latest.meta.step, latest.meta.epoch) == (4, 0)
    second = _run_gang("stopped", store, tmp_path / "second", augment=True)
    assert second[0]["outcome"] == "succeeded" and second[0]["step"] == 12
    resumed, reference = (_params(tmp_path / "second" / "rank0.npz"),
                          _params(tmp_path / "whole" / "rank0.npz"))
    for name in reference:
        assert np.array_equal(resumed[name], reference[name]), name


def test_each_rank_reads_its_part_of_the_global_batch_with_per_sample_augmentations(
        tmp_path: Path) -> None:
    """No processes: the loaders of ranks 0 and 1 of 2, against one rank of 1."""
    import engine
    import engine.random
    from workers.data_sources import DatasetCache, build_transforms, image_dataset
    from workers.shards import ImageShardLoader

    _upload(tmp_path / "store")
    cache = DatasetCache(tmp_path / "cache", LocalStore(tmp_path / "store"))
    spec = parse_spec(_spec(1, augment=True))
    dataset, _ = image_dataset(spec.data.train, cache, _lookup)
    transforms = build_transforms(spec.data.train.transforms, None)

    def loader(rank: int, size: int) -> ImageShardLoader:
        shards = ImageShardLoader(dataset, transforms, global_batch=8, rank=rank, size=size,
                                  shuffle=True, seed=11, ctx=engine.cpu())
        shards.set_epoch(1)
        return shards

    engine.random.seed(3)
    before = engine.random.get_state()
    one = [(x.asnumpy(), y.asnumpy()) for x, y in loader(0, 1)]
    assert engine.random.get_state() == before  # the process's stream is not drawn from
    halves = [[(x.asnumpy(), y.asnumpy()) for x, y in loader(r, 2)] for r in range(2)]
    assert [len(one[k][0]) for k in range(6)] == [8, 8, 8, 8, 8, 4]
    for k, (images, labels) in enumerate(one):
        # rank r has positions r, r + 2, ...: the same images, augmented the same
        for rank in range(2):
            np.testing.assert_array_equal(halves[rank][k][0], images[rank::2])
            np.testing.assert_array_equal(halves[rank][k][1], labels[rank::2])
    (last,) = [x.asnumpy() for x, _ in loader(1, 2).iter_from(5)]  # a resume's place
    np.testing.assert_array_equal(last, halves[1][5][0])
    again = [x.asnumpy() for x, _ in loader(0, 1)]
    assert all(np.array_equal(a, b) for a, (b, _) in zip(again, one, strict=True))
    plain = ImageShardLoader(dataset, build_transforms(parse_spec(_spec(1, False)).data.train
                                                       .transforms, None),
                             global_batch=8, rank=0, size=1, shuffle=True, seed=11,
                             ctx=engine.cpu(), random_transforms=False)
    plain.set_epoch(1)
    assert not np.allclose(next(iter(plain))[0].asnumpy(), one[0][0])  # augmented
    epoch_2 = loader(0, 1)
    epoch_2.set_epoch(2)
    assert not np.array_equal(next(iter(epoch_2))[0].asnumpy(), one[0][0])


def test_one_worker_with_random_augmentations_resumes_mid_epoch_bit_identically(
        tmp_path: Path) -> None:
    """A single worker is rank 0 of 1: the batches it skips to reach its place in the
    epoch draw nothing from the random stream its checkpoint restored."""
    from workers.runner import JobRunner

    store = tmp_path / "store"
    _upload(store)

    def run(job_id: str, crash_at: int | None) -> JobRunner:
        scripted = ScriptedIO({}, crash_at=crash_at)
        runner = JobRunner(job_id, _spec(1, augment=True), LocalStore(store),
                           scripted,  # type: ignore[arg-type]
                           lookup_dataset=_lookup, data_cache=tmp_path / "cache")
        scripted.runner = runner
        runner.run()
        return runner

    whole = run("whole", None)
    assert run("stopped", 6).state.step == 6
    latest = latest_complete_checkpoint(LocalStore(store), "stopped")
    assert latest is not None and (latest.meta.step, latest.meta.epoch) == (4, 0)
    resumed = run("stopped", None)
    assert resumed.state.step == whole.state.step == 12
    for mine, theirs in zip(resumed.trainer.parameters, whole.trainer.parameters,
                            strict=True):
        assert np.array_equal(mine.data().asnumpy(), theirs.data().asnumpy()), mine.name
