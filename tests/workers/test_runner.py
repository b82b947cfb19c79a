"""The worker's job lifecycle in-process: real Redis, PostgreSQL and object storage."""

from __future__ import annotations

import io
import multiprocessing
import uuid
from typing import Any

import boto3
import numpy as np
import pytest

from core import repositories as repo
from core.channel import Channel
from core.db import session_scope
from core.models import LRChangeMode
from core.storage import store_from_settings
from tests.services import wait_until
from workers.checkpoints import latest_complete_checkpoint

SPEC: dict[str, Any] = {
    "name": "runner-test",
    "model": [{"type": "Dense", "units": 32, "activation": "relu"},
              {"type": "Dropout", "rate": 0.2},
              {"type": "Dense", "units": 10}],
    "data": {"train": {"builtin": "digits", "split": "train"},
             "val": {"builtin": "digits", "split": "val"}, "batch_size": 64, "shuffle": True},
    "loss": {"type": "softmax_cross_entropy"},
    "initializer": {"type": "xavier"},
    "optimizer": {"type": "adam", "learning_rate": 0.01},
    "lr_scheduler": {"type": "cosine", "max_update": 200, "final_lr": 0.0001},
    "epochs": 10,
    "metrics": ["accuracy", "cross-entropy"],
    "checkpoint": {"every_steps": 15, "keep_last": 2},
    "seed": 3,
    "device": "cpu",
}


def _submit(spec: dict[str, Any], lr_change: float | None = None) -> str:
    from core.jobspec import parse_spec

    stored = parse_spec(spec).model_dump(mode="json")
    with session_scope() as session:
        user = repo.get_user_by_name(session, name="runner") or repo.create_user(
            session, name="runner")
        job = repo.create_job(session, owner_id=user.id, name=spec["name"], spec=stored,
                              queue="cpu")
        if lr_change is not None:
            repo.create_lr_change(session, job_id=job.id, requested_lr=lr_change,
                                  mode=LRChangeMode.SCALE, requested_by=user.id)
        return job.id


def _final_params(job_id: str) -> dict[str, np.ndarray]:
    loaded = latest_complete_checkpoint(store_from_settings(), job_id)
    assert loaded is not None
    with np.load(io.BytesIO(loaded.params), allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def _job(job_id: str) -> Any:
    with session_scope() as session:
        return repo.get_job(session, job_id=job_id)


@pytest.fixture(params=["local", "s3"])
def storage_kind(request: pytest.FixtureRequest, worker_env: dict[str, str],
                 monkeypatch: pytest.MonkeyPatch) -> str:
    """Run on the local directory store and on S3 over HTTP (moto)."""
    if request.param == "s3":
        endpoint = request.getfixturevalue("s3_endpoint")
        bucket = f"rudder-w-{uuid.uuid4().hex[:10]}"
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
            Bucket=bucket)
        monkeypatch.setenv("RUDDER_STORAGE_URL", f"s3://{bucket}/objects")
        monkeypatch.setenv("RUDDER_S3_ENDPOINT_URL", endpoint)
        from tests.workers.conftest import _clear_caches

        _clear_caches()
    return str(request.param)


def test_job_trains_publishes_and_checkpoints(storage_kind: str, channel: Channel) -> None:
    from workers.lifecycle import run_job

    job_id = _submit(SPEC, lr_change=0.002)  # requested while queued: applied at step 1
    assert run_job(job_id).result == "succeeded"
    job = _job(job_id)
    assert job.status == "succeeded" and job.step > 0
    assert job.latest_metrics["val_accuracy"] > 0.8
    events = channel.read_events(job_id, count=10_000)
    kinds = [e.type for e in events]
    assert kinds[0] == "status" and events[0].data["status"] == "running"
    assert events[-1].data["status"] == "succeeded"
    lr_event = next(e for e in events if e.type == "lr")
    assert lr_event.data["applied_step"] == 1
    assert lr_event.data["learning_rate"] == pytest.approx(0.002)
    first_metric = next(e for e in events if e.type == "metric")
    assert {"train_accuracy", "train_loss", "lr"} <= set(first_metric.data["values"])
    epoch_metric = next(e for e in events if e.type == "metric"
                        and "val_accuracy" in e.data["values"])
    assert "val_cross-entropy" in epoch_metric.data["values"]
    with session_scope() as session:
        rows = repo.list_checkpoints(session, job_id=job_id)
        names = {p.name for p in repo.list_metric_points(session, job_id=job_id)}
        change = repo.list_lr_changes(session, job_id=job_id)[0]
    assert [r.step for r in rows][-1] == job.step and len(rows) == 2  # keep_last: 2
    assert {"train_loss", "val_accuracy", "lr"} <= names
    assert (change.status, change.applied_step) == ("applied", 1)
    assert run_job(job_id).result == "skipped:succeeded"  # a re-delivered task is a no-op


def test_pacing_spares_fast_jobs_without_losing_data(
    worker_env: dict[str, str], channel: Channel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job far faster than the publish and checkpoint floors: interval checkpoints are
    skipped (the final one is written), the live stream gets the first and the last
    epoch's values, and the DB still gets every epoch's points."""
    from tests.workers.conftest import _clear_caches
    from workers.lifecycle import run_job

    monkeypatch.setenv("RUDDER_WORKER_CHECKPOINT_MIN_INTERVAL_SECONDS", "3600")
    monkeypatch.setenv("RUDDER_WORKER_METRICS_MIN_INTERVAL_SECONDS", "3600")
    _clear_caches()
    spec = {**SPEC, "epochs": 6, "lr_scheduler": None}
    job_id = _submit(spec)
    assert run_job(job_id).result == "succeeded"
    job = _job(job_id)
    assert job.epoch == 6  # epochs completed
    with session_scope() as session:
        rows = repo.list_checkpoints(session, job_id=job_id)
        val_points = [p for p in repo.list_metric_points(session, job_id=job_id)
                      if p.name == "val_accuracy"]
    assert [r.step for r in rows] == [job.step]  # only the end-of-job checkpoint
    assert sorted(p.epoch for p in val_points) == [0, 1, 2, 3, 4, 5]
    epoch_events = [e.data for e in channel.read_events(job_id, count=10_000)
                    if e.type == "metric" and "val_accuracy" in e.data["values"]]
    assert [(e["epoch"], e["epochs_done"]) for e in epoch_events] == [(0, 1), (5, 6)]
    assert epoch_events[-1]["step"] == job.step


def _run_in_child(job_id: str) -> None:
    from workers.lifecycle import run_job

    run_job(job_id)


def test_killed_run_resumes_from_checkpoint_with_identical_weights(
    worker_env: dict[str, str], channel: Channel
) -> None:
    from workers.lifecycle import run_job
    from workers.watchdog import sweep

    spec = {**SPEC, "epochs": 30}
    reference = _submit(spec, lr_change=0.003)
    assert run_job(reference).result == "succeeded"

    crashed = _submit(spec, lr_change=0.003)
    store = store_from_settings()
    child = multiprocessing.get_context("spawn").Process(target=_run_in_child, args=(crashed,))
    child.start()
    wait_until(lambda: latest_complete_checkpoint(store, crashed) is not None, 60,
               interval=0.001, what="first checkpoint")
    child.kill()  # SIGKILL: no cleanup, the lease is left to expire
    child.join()
    killed_at = latest_complete_checkpoint(store, crashed)
    assert killed_at is not None and killed_at.meta.step < _job(reference).step
    assert _job(crashed).status == "running"
    requeued = wait_until(lambda: sweep(channel), 10,
                          what="lease expiry and re-queue")
    assert requeued == [crashed]
    assert run_job(crashed).result == "succeeded"
    assert _job(crashed).step == _job(reference).step

    resumed, uninterrupted = _final_params(crashed), _final_params(reference)
    assert resumed.keys() == uninterrupted.keys()
    for name in resumed:
        assert np.array_equal(resumed[name], uninterrupted[name]), name


def test_spec_the_engine_cannot_build_fails_the_job_with_a_reason(
    worker_env: dict[str, str], channel: Channel
) -> None:
    from workers.lifecycle import run_job

    if _has_gpu():
        pytest.skip("this machine has a GPU; the gpu-less failure cannot be shown")
    job_id = _submit({**SPEC, "device": "gpu"})
    assert run_job(job_id).result == "failed"
    job = _job(job_id)
    assert job.status == "failed" and "GPU" in job.status_reason
    assert channel.read_events(job_id)[-1].data["status"] == "failed"


def _has_gpu() -> bool:
    import engine

    return bool(engine.context.num_gpus() > 0)


@pytest.mark.gpu
def test_gpu_job_trains_and_resumes_on_the_gpu(worker_env: dict[str, str],
                                               channel: Channel) -> None:
    pytest.importorskip("cupy")
    if not _has_gpu():
        pytest.skip("no CUDA GPU visible")
    from workers.lifecycle import run_job

    job_id = _submit({**SPEC, "device": "gpu", "epochs": 4})
    assert run_job(job_id).result == "succeeded"
    assert _job(job_id).latest_metrics["val_accuracy"] > 0.8
    assert set(_final_params(job_id))  # saved from device arrays into a plain npz


def test_job_trains_on_an_uploaded_dataset(worker_env: dict[str, str]) -> None:
    from core.datasets import validate_upload
    from core.storage import dataset_key
    from workers.build import builtin_arrays
    from workers.lifecycle import run_job

    data, label = builtin_arrays("digits", "train")
    buffer = io.BytesIO()
    np.savez(buffer, data=data, label=label.astype(np.int64))
    checked = validate_upload("digits.npz", buffer.getvalue(), max_rows=10_000,
                              max_features=1_000)
    with session_scope() as session:
        user = repo.create_user(session, name="uploader")
        dataset = repo.create_dataset(
            session, owner_id=user.id, name="digits.npz", format=checked.format,
            storage_key="", size=len(checked.npz_bytes), sha256=checked.sha256,
            num_rows=checked.num_rows, feature_shape={"shape": checked.feature_shape},
            dtype=checked.dtype, num_classes=checked.num_classes)
        dataset.storage_key = dataset_key(dataset.id, "npz")
        key, dataset_id = dataset.storage_key, dataset.id
    store_from_settings().put(key, checked.npz_bytes)
    spec = {**SPEC, "epochs": 4, "lr_scheduler": None,
            "data": {**SPEC["data"], "train": {"dataset": dataset_id}}}
    job_id = _submit(spec)
    assert run_job(job_id).result == "succeeded"
    assert _job(job_id).latest_metrics["val_accuracy"] > 0.8
