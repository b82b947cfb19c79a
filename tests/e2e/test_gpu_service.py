"""A ``device: gpu`` job through the service (issue 28), on the embedded defaults' parts
(SQLite, a private Redis, the local object store) with real API and worker processes:
it trains on the GPU, takes a live learning-rate change confirmed with its step,
checkpoints, survives kill -9 of its worker and resumes on the GPU; its GPU checkpoint
continues on the CPU, and that CPU checkpoint on the GPU again. Skipped without a GPU."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import backend
from rudder.client import Client
from tests import services
from tests.e2e.conftest import example_spec
from tests.e2e.events import EventTap, is_status, metric_at_least
from tests.e2e.harness import Stack, running_stack, stack_env
from tests.services import wait_until

pytestmark = [
    pytest.mark.slow, pytest.mark.gpu,
    pytest.mark.skipif(backend.gpu_count() == 0, reason="needs cupy and a CUDA GPU"),
]


@pytest.fixture(scope="module")
def gpu_stack(sqlite_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("gpu-e2e")
    with services.redis_server() as redis_url:
        env = stack_env(sqlite_url, redis_url, f"file://{home / 'objects'}")
        with running_stack(env, home, user="gpu-user") as stack:
            yield stack


def _worker_log(stack: Stack) -> str:
    return "".join(p.read_text(errors="replace") for p in sorted(stack.logs.glob("worker-*.log")))


def _trained_on(stack: Stack, job_id: str) -> list[str]:
    """The devices the workers' logs say the job was built on, in order."""
    marker = f"job {job_id} trains on "
    return [line.split(marker, 1)[1].strip() for line in _worker_log(stack).splitlines()
            if marker in line]


def _follow(stack: Stack, client: Client, job: dict[str, Any], status: str,
            timeout: float) -> EventTap:
    tap = EventTap(stack.api_url, stack.token, job["id"])
    try:
        tap.wait_for(is_status(status), timeout, f"job {job['name']} {status}")
    finally:
        tap.close()
    return tap


def _val_accuracy(tap: EventTap) -> float:
    values = [e.data["values"]["val_accuracy"] for e in tap.snapshot()
              if e.type == "metric" and "val_accuracy" in e.data["values"]]
    assert values, "no validation point"
    return float(values[-1])


def test_a_gpu_job_steers_checkpoints_survives_kill_9_and_moves_between_devices(
        gpu_stack: Stack, tmp_path: Path) -> None:
    stack = gpu_stack
    with Client(stack.api_url, stack.token, timeout=30) as client:
        job = client.submit(example_spec(name="on-gpu", device="gpu", epochs=400,
                                         checkpoint={"every_steps": 100, "keep_last": 5}))
        tap = EventTap(stack.api_url, stack.token, job["id"])
        try:
            tap.wait_for(metric_at_least(20), 120, "first metrics on the GPU")
            change = client.set_learning_rate(job["id"], 0.0005)
            confirmed = tap.wait_for(lambda e: e.type == "lr" and
                                     e.data["change_id"] == change["change_id"], 30, "lr event")
            applied = confirmed.data["applied_step"]
            after = tap.wait_for(metric_at_least(applied), 30, "a metric after the change")
            assert math.isclose(after.data["values"]["lr"], 0.0005)
            saved = tap.wait_for(lambda e: e.type == "checkpoint" and e.data["step"] > applied,
                                 60, "a checkpoint after the change")

            [victim] = stack.workers
            stack.kill_worker(victim)
            stack.start_worker()
            wait_until(lambda: any(f"job {job['id']} resumes from step" in line
                                   for line in _worker_log(stack).splitlines()),
                       90, interval=0.2, what="the new worker to resume the job")
            tap.wait_for(metric_at_least(saved.data["step"] + 50), 60, "training past it")
            assert _trained_on(stack, job["id"]) == ["gpu(0)", "gpu(0)"]
            assert client.learning_rate(job["id"])["learning_rate"] == pytest.approx(0.0005)

            client.pause(job["id"])
            paused = tap.wait_for(is_status("paused"), 60, "paused")
        finally:
            tap.close()
        assert _val_accuracy(tap) >= 0.8  # a few epochs in: trained, far above chance (0.1)

        # The GPU checkpoint continues on the CPU ...
        epoch = client.get_job(job["id"])["progress"]["epoch"]
        on_cpu = client.fork(job["id"], overrides={"name": "to-cpu", "device": "cpu",
                                                  "epochs": epoch + 2})
        cpu_tap = _follow(stack, client, on_cpu, "succeeded", 120)
        assert _trained_on(stack, on_cpu["id"]) == ["cpu(0)"]
        assert _val_accuracy(cpu_tap) >= 0.9
        steps = [e.data["step"] for e in cpu_tap.snapshot() if e.type == "metric"]
        assert min(steps) >= paused.data["step"] and max(steps) > paused.data["step"]

        # ... and that CPU checkpoint on the GPU again.
        on_gpu = client.fork(on_cpu["id"], overrides={"name": "to-gpu", "device": "gpu",
                                                     "epochs": epoch + 4})
        gpu_tap = _follow(stack, client, on_gpu, "succeeded", 120)
        assert _trained_on(stack, on_gpu["id"]) == ["gpu(0)"]
        assert _val_accuracy(gpu_tap) >= 0.9
        client.cancel(job["id"])
