"""Jobs whose model is an uploaded MXNet symbol or a zoo network train through the real
worker lifecycle, and leave as MXNet files (issue 12)."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import engine as mx
from core import repositories as repo
from core.channel import Channel
from core.datasets import validate_upload
from core.db import session_scope
from core.events import PauseCommand
from core.models import JobStatus
from core.storage import (
    MODEL_META_FILE,
    MODEL_PARAMS_FILE,
    MODEL_SYMBOL_FILE,
    dataset_key,
    job_export_prefix,
    model_prefix,
    store_from_settings,
)
from engine.ndarray.mxnet_format import read_params
from tests import model_files
from tests.services import wait_until
from tests.workers.conftest import _clear_caches
from tests.workers.test_runner import SPEC, _final_params, _job, _submit


@pytest.fixture
def slow_worker_env(worker_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
                    ) -> dict[str, str]:
    """These networks take seconds per step on a busy CPU: a 2 s lease would expire under
    load (the heartbeat thread is starved) and the job would stop as "lease lost"."""
    monkeypatch.setenv("RUDDER_WORKER_LEASE_TTL_SECONDS", "60")
    _clear_caches()
    return {**worker_env, "RUDDER_WORKER_LEASE_TTL_SECONDS": "60"}


def _train_losses(job_id: str) -> list[float]:
    with session_scope() as session:
        points = repo.list_metric_points(session, job_id=job_id)
    return [p.value for p in sorted(points, key=lambda p: p.step) if p.name == "train_loss"]


def _upload_model(owner: str) -> str:
    with session_scope() as session:
        user = repo.get_user_by_name(session, name=owner) or repo.create_user(session,
                                                                              name=owner)
        row = repo.create_model(
            session, owner_id=user.id, name="residual", storage_prefix="", symbol_sha256="",
            symbol_size=0, input_name="data", input_shape=list(model_files.INPUT_SHAPE),
            output_shapes=[[1, 10]], ops={}, parameter_count=254)
        model_id = row.id
    store = store_from_settings()
    prefix = model_prefix(model_id)
    store.put(prefix + MODEL_SYMBOL_FILE, model_files.symbol_json())
    store.put(prefix + MODEL_PARAMS_FILE, model_files.params_file())
    store.put(prefix + MODEL_META_FILE, json.dumps(
        {"input_name": "data", "input_shape": list(model_files.INPUT_SHAPE)}).encode())
    return model_id


def _exported(job_id: str, folder: Path) -> Any:
    store = store_from_settings()
    for name in (MODEL_SYMBOL_FILE, MODEL_PARAMS_FILE):
        (folder / name).write_bytes(store.get(job_export_prefix(job_id) + name))
    return mx.gluon.SymbolBlock.imports(str(folder / MODEL_SYMBOL_FILE), ["data"],
                                        str(folder / MODEL_PARAMS_FILE))


def test_an_uploaded_symbol_trains_from_its_params_and_is_exported(
    slow_worker_env: dict[str, str], tmp_path: Path
) -> None:
    from workers.lifecycle import run_job

    model_id = _upload_model("runner")
    spec = {**SPEC, "model": {"model": model_id, "params": True}, "epochs": 6,
            "lr_scheduler": None, "optimizer": {"type": "adam", "learning_rate": 0.02}}
    job_id = _submit(spec)
    assert run_job(job_id).result == "succeeded"
    losses = _train_losses(job_id)
    assert losses[-1] < 0.85 * losses[0], losses
    net = _exported(job_id, tmp_path)
    x = np.random.default_rng(0).random((2, 64)).astype(np.float32)
    assert net(mx.nd.array(x)).shape == (2, 10)


def _image_dataset(owner: str) -> str:
    """64 images 3x32x32 of two classes a small network separates in a few steps."""
    rng = np.random.default_rng(0)
    label = np.arange(64) % 2
    data = rng.normal(0, 0.2, size=(64, 3, 32, 32)).astype(np.float32)
    data += np.where(label == 1, 1.0, -1.0)[:, None, None, None].astype(np.float32)
    buffer = io.BytesIO()
    np.savez(buffer, data=data, label=label.astype(np.int64))
    checked = validate_upload("images.npz", buffer.getvalue(), max_rows=1_000,
                              max_features=10_000)
    with session_scope() as session:
        user = repo.get_user_by_name(session, name=owner) or repo.create_user(session,
                                                                              name=owner)
        dataset = repo.create_dataset(
            session, owner_id=user.id, name="images.npz", format=checked.format,
            storage_key="", size=len(checked.npz_bytes), sha256=checked.sha256,
            num_rows=checked.num_rows, feature_shape=checked.feature_shape,
            dtype=checked.dtype, num_classes=checked.num_classes)
        dataset.storage_key = dataset_key(dataset.id, "npz")
        key, dataset_id = dataset.storage_key, dataset.id
    store_from_settings().put(key, checked.npz_bytes)
    return str(dataset_id)


def test_a_zoo_resnet18_trains_on_32x32_images_and_is_exported(
    slow_worker_env: dict[str, str], tmp_path: Path
) -> None:
    from workers.lifecycle import run_job

    dataset_id = _image_dataset("runner")
    spec = {**SPEC, "model": {"zoo": "resnet18_v1", "classes": 2}, "epochs": 2,
            "lr_scheduler": None, "metrics": ["accuracy"],
            "optimizer": {"type": "adam", "learning_rate": 0.001},
            "data": {"train": {"dataset": dataset_id}, "batch_size": 16, "shuffle": True}}
    job_id = _submit(spec)
    assert run_job(job_id).result == "succeeded"
    losses = _train_losses(job_id)
    assert min(losses[len(losses) // 2:]) < losses[0], losses
    net = _exported(job_id, tmp_path)
    x = np.zeros((1, 3, 32, 32), dtype=np.float32)
    assert net(mx.nd.array(x)).shape == (1, 2)
    # MXNet's own names (a fresh process's resnetv10_), so MXNet's resnet18_v1 loads them
    names = list(read_params((tmp_path / MODEL_PARAMS_FILE).read_bytes(), max_bytes=10**9))
    assert "arg:resnetv10_conv0_weight" in names, names[:3]


@pytest.mark.slow  # two resnet18 runs: about a minute on a shared CPU
def test_a_paused_and_resumed_zoo_job_ends_with_the_weights_of_an_uninterrupted_one(
    slow_worker_env: dict[str, str], channel: Channel
) -> None:
    """BatchNorm statistics, Adam's states and the data position all survive the pause."""
    from workers.lifecycle import run_job

    dataset_id = _image_dataset("runner")
    spec = {**SPEC, "model": {"zoo": "resnet18_v1", "classes": 2}, "epochs": 2,
            "lr_scheduler": None, "metrics": ["accuracy"],
            "optimizer": {"type": "adam", "learning_rate": 0.001},
            "checkpoint": {"every_steps": 1000, "keep_last": 2},
            "data": {"train": {"dataset": dataset_id}, "batch_size": 16, "shuffle": True}}
    reference = _submit(spec)
    assert run_job(reference).result == "succeeded"

    paused = _submit(spec)

    def pause_once_running() -> None:
        # a resnet step takes a second or more here: the pause lands within the epoch
        wait_until(lambda: any(e.type == "status" and e.data["status"] == "running"
                               for e in channel.read_events(paused)),
                   120, interval=0.01, what="the job running")
        channel.send_command(paused, PauseCommand(requested_by="test"))

    pauser = threading.Thread(target=pause_once_running)
    pauser.start()
    assert run_job(paused).result == "paused"
    pauser.join()
    stopped_at = _job(paused).step
    assert 0 < stopped_at < _job(reference).step
    with session_scope() as session:
        assert repo.transition_job(session, job_id=paused, to_status=JobStatus.QUEUED,
                                   from_statuses=[JobStatus.PAUSED])
    assert run_job(paused).result == "succeeded"
    resumed, uninterrupted = _final_params(paused), _final_params(reference)
    assert resumed.keys() == uninterrupted.keys()
    for name in resumed:
        assert np.array_equal(resumed[name], uninterrupted[name]), name
