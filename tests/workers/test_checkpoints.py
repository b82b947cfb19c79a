from __future__ import annotations

import json
from pathlib import Path

from core.storage import LocalStore, ObjectStore
from workers.checkpoints import (
    META_FILE,
    PARAMS_FILE,
    CheckpointMeta,
    Pruner,
    checkpoint_prefix,
    latest_complete_checkpoint,
    list_checkpoint_steps,
    prune_checkpoints,
    sha256_hex,
    sweep_interrupted_writes,
    write_checkpoint,
)

JOB = "00000000-0000-0000-0000-000000000001"


def _meta(step: int, epoch: int = 0) -> CheckpointMeta:
    return CheckpointMeta(job_id=JOB, step=step, epoch=epoch, batch_index=step % 7,
                          data_seed=42, rng_state={"seed": 42, "numpy": {"state": 2**100}})


def _write(store: ObjectStore, step: int) -> CheckpointMeta:
    written = write_checkpoint(store, _meta(step), f"params{step}".encode(),
                               f"trainer{step}".encode())
    assert written is not None
    return written


def test_written_checkpoint_uses_design_layout_and_reads_back(store: ObjectStore) -> None:
    written = _write(store, 200)
    keys = {item.key for item in store.list(f"jobs/{JOB}/")}
    prefix = f"jobs/{JOB}/checkpoints/0000000200/"
    assert keys == {prefix + "params.npz", prefix + "trainer.npz", prefix + "meta.json"}
    meta = json.loads(store.get(prefix + META_FILE))
    assert meta["files"]["params.npz"]["sha256"] == sha256_hex(b"params200")
    assert meta["rng_state"]["numpy"]["state"] == 2**100  # big ints survive JSON
    loaded = latest_complete_checkpoint(store, JOB)
    assert loaded is not None
    assert loaded.meta == written
    assert (loaded.params, loaded.trainer) == (b"params200", b"trainer200")


def test_resume_skips_checkpoint_without_meta_or_with_bad_hash(store: ObjectStore) -> None:
    _write(store, 100)
    _write(store, 200)
    _write(store, 300)
    # 300: the worker died before meta.json; 200: a file was corrupted after writing.
    store.delete(checkpoint_prefix(JOB, 300) + META_FILE)
    store.put(checkpoint_prefix(JOB, 200) + PARAMS_FILE, b"bit rot")
    loaded = latest_complete_checkpoint(store, JOB)
    assert loaded is not None and loaded.meta.step == 100


def test_no_checkpoint_means_start_from_scratch(store: ObjectStore) -> None:
    assert latest_complete_checkpoint(store, JOB) is None
    store.put(checkpoint_prefix(JOB, 5) + META_FILE, b"{not json")
    assert latest_complete_checkpoint(store, JOB) is None


def test_fenced_writer_leaves_no_meta(store: ObjectStore) -> None:
    calls = iter([True, True, False])  # lease lost just before meta.json
    result = write_checkpoint(store, _meta(50), b"p", b"t", still_owner=lambda: next(calls))
    assert result is None
    assert not store.exists(checkpoint_prefix(JOB, 50) + META_FILE)
    assert latest_complete_checkpoint(store, JOB) is None


def test_prune_keeps_last_n_complete_and_newer_in_progress(store: ObjectStore) -> None:
    for step in (10, 20, 30, 40):
        _write(store, step)
    store.put(checkpoint_prefix(JOB, 50) + PARAMS_FILE, b"half-written")  # in progress
    removed = prune_checkpoints(store, JOB, keep_last=2)
    assert sorted(removed) == [10, 20]
    assert list_checkpoint_steps(store, JOB) == [50, 40, 30]
    loaded = latest_complete_checkpoint(store, JOB)
    assert loaded is not None and loaded.meta.step == 40


def test_pruning_leaves_no_empty_step_folders(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    for step in (10, 20, 30, 40):
        _write(store, step)
    assert sorted(prune_checkpoints(store, JOB, keep_last=2)) == [10, 20]
    folders = sorted(p.name for p in (tmp_path / "jobs" / JOB / "checkpoints").iterdir())
    assert folders == ["0000000030", "0000000040"]


def test_resume_sweeps_what_the_dead_run_left_after_its_last_checkpoint(
        store: ObjectStore) -> None:
    for step in (10, 20):
        _write(store, step)
    # The dead run: step 30 lost its meta.json (killed between files), step 40 got one file.
    _write(store, 30)
    store.delete(checkpoint_prefix(JOB, 30) + META_FILE)
    store.put(checkpoint_prefix(JOB, 40) + PARAMS_FILE, b"half")
    assert sweep_interrupted_writes(store, JOB, resumed_step=20) == [30, 40]
    assert list_checkpoint_steps(store, JOB) == [20, 10]
    loaded = latest_complete_checkpoint(store, JOB)
    assert loaded is not None and loaded.meta.step == 20
    # A job with no complete checkpoint starts over: every step folder is debris.
    store.put(checkpoint_prefix(JOB, 50) + PARAMS_FILE, b"half")
    assert sweep_interrupted_writes(store, "other-job", resumed_step=None) == []
    assert 50 in list_checkpoint_steps(store, JOB)


def test_a_pruning_plan_whose_rows_were_not_removed_is_planned_again(
        store: ObjectStore) -> None:
    pruner = Pruner(store, JOB, keep_last=1)
    for step in (10, 20):
        _write(store, step)
    assert pruner.plan(20) == [10]
    pruner.forget()  # recording checkpoint 20 (and dropping 10's row) failed
    _write(store, 30)
    removed = pruner.plan(30)
    assert sorted(removed) == [10, 20]
    pruner.delete(removed)
    assert list_checkpoint_steps(store, JOB) == [30]
