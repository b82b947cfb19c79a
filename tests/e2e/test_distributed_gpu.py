"""A ``device: gpu`` job on two workers through the service (issues 23 and 28): real API
and Celery worker processes on the embedded defaults' parts (SQLite, a private Redis, the
local object store), both ranks on the machine's GPU.

Two ranks on one GPU cannot use NCCL (it refuses two ranks on one device), so the ranks
must agree to reduce through host memory on Gloo; this checks that they do, that the gang
ends with what one GPU worker of the same global batch ends with, that a learning-rate
change is confirmed at one step on both ranks, and that a rank killed with SIGKILL leaves a
job that resumes on the GPU and ends bit-identical to an uninterrupted 2-rank GPU run.
Skipped without a GPU; ``RUDDER_TEST_GANG_DEVICE=cpu`` runs the same flow on the CPU.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from core.migrate import upgrade
from engine import backend
from rudder.client import Client
from tests import services
from tests.e2e.conftest import final_params
from tests.e2e.harness import Stack
from tests.e2e.test_distributed import (
    _cluster,
    _spec,
    _wait_status,
    _worker_of_rank,
    applied_learning_rate_change,
    gang_that_trains_what_one_worker_trains,
)
from tests.services import wait_until

DEVICE = os.environ.get("RUDDER_TEST_GANG_DEVICE", "gpu")
pytestmark = [
    pytest.mark.slow, pytest.mark.gpu,
    pytest.mark.skipif(DEVICE == "gpu" and backend.gpu_count() == 0,
                       reason="needs cupy and a CUDA GPU"),
]
STAGED = "GPU arrays reduce through host memory"


@pytest.fixture(scope="module")
def gpu_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """test_distributed's two-worker cluster, on the embedded defaults' SQLite (the GPU
    machine has no PostgreSQL)."""
    database_url = f"sqlite:///{tmp_path_factory.mktemp('gpu-gang-db') / 'rudder.db'}"
    upgrade(database_url)
    with services.redis_server() as redis_url:
        yield from _cluster(database_url, redis_url, tmp_path_factory)


@pytest.fixture
def client(gpu_cluster: Stack) -> Iterator[Client]:
    with Client(gpu_cluster.api_url, gpu_cluster.token, timeout=30) as api_client:
        yield api_client


def _worker_lines(stack: Stack, needle: str) -> list[str]:
    return [line for path in sorted(stack.logs.glob("worker-*.log"))
            for line in path.read_text(errors="replace").splitlines() if needle in line]


def _device(spec_workers: int, **changes: object) -> dict[str, object]:
    return _spec(spec_workers, device=DEVICE, **changes)


def test_two_ranks_on_one_gpu_train_what_one_gpu_worker_trains(
        client: Client, gpu_cluster: Stack, tmp_path: Path) -> None:
    gang = gang_that_trains_what_one_worker_trains(client, gpu_cluster, _device, tmp_path)
    built_on = [line.rsplit(" ", 1)[1] for line in
                _worker_lines(gpu_cluster, f"job {gang} trains on ")]
    assert built_on == [f"{DEVICE}(0)"] * 2, built_on
    if DEVICE == "gpu":  # both ranks chose host staging, alike
        assert len(_worker_lines(gpu_cluster, STAGED)) >= 2, gpu_cluster.log_tail(40)


def test_a_learning_rate_change_is_applied_at_one_step_on_both_gpu_ranks(
        client: Client, gpu_cluster: Stack) -> None:
    job_id = client.submit(_device(2, epochs=60,
                                   checkpoint={"every_steps": 1000, "keep_last": 3}))["id"]
    command = applied_learning_rate_change(client, job_id, 0.003)
    step = command["applied_step"]
    assert command["result"]["rank_steps"] == [step, step]
    client.cancel(job_id)
    assert _wait_status(client, gpu_cluster, job_id, {"cancelled"})["status"] == "cancelled"


def test_a_killed_gpu_rank_resumes_bit_identically(client: Client, gpu_cluster: Stack,
                                                    tmp_path: Path) -> None:
    spec = _device(2, epochs=40, checkpoint={"every_steps": 50, "keep_last": 3})
    uninterrupted_id = client.submit(spec)["id"]
    assert _wait_status(client, gpu_cluster, uninterrupted_id,
                        {"succeeded", "failed"})["status"] == "succeeded"
    uninterrupted = final_params(client, uninterrupted_id, tmp_path / "whole")

    job_id = client.submit(spec)["id"]
    wait_until(lambda: any(c["step"] >= 100 for c in client.checkpoints(job_id)["data"]),
               120, interval=0.05, what="a checkpoint past step 100")
    victim = _worker_of_rank(gpu_cluster, job_id, 1)
    killed = time.monotonic()
    gpu_cluster.kill_worker(victim)
    wait_until(lambda: client.get_job(job_id)["status"] != "running", 5, interval=0.05,
               what="the job out of 'running' within 5 s of the kill")
    assert time.monotonic() - killed < 5
    gpu_cluster.start_worker()
    job = _wait_status(client, gpu_cluster, job_id, {"succeeded", "failed"}, timeout=180)
    assert job["status"] == "succeeded", job
    assert job["attempts"] >= 1
    resumed = final_params(client, job_id, tmp_path / "resumed")
    for name in uninterrupted:
        assert np.array_equal(resumed[name], uninterrupted[name]), name
