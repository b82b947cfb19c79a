"""The service end to end: real API and worker processes, PostgreSQL, Redis, object store."""

from __future__ import annotations

import hashlib
import math
import signal
from pathlib import Path

import numpy as np
import pytest

from rudder.client import Client, RudderError
from tests.e2e.conftest import example_spec, final_params
from tests.e2e.events import EventTap, is_status, metric_at_least
from tests.e2e.harness import Stack
from tests.services import wait_until

pytestmark = pytest.mark.slow


def _checkpoints(client: Client, job_id: str) -> list[dict]:
    body = client.checkpoints(job_id)
    return list(body["data"] if isinstance(body, dict) else body)


def test_live_lr_pause_resume_and_checkpoints(stack: Stack, client: Client,
                                              tmp_path: Path) -> None:
    # Many epochs: training takes ~0.5 ms a step here, and the job must still be running
    # when the test steers it.
    job = client.submit(example_spec(epochs=150))
    tap = EventTap(stack.api_url, stack.token, job["id"])
    try:
        tap.wait_for(metric_at_least(10), 90, "first metrics")
        change = client.set_learning_rate(job["id"], 0.0005)
        assert change["status"] == "pending"
        confirmed = tap.wait_for(lambda e: e.type == "lr" and
                                 e.data["change_id"] == change["change_id"], 30, "lr event")
        applied_step = confirmed.data["applied_step"]
        assert math.isclose(confirmed.data["learning_rate"], 0.0005)
        after = tap.wait_for(metric_at_least(applied_step), 30, "metric after the change")
        assert math.isclose(after.data["values"]["lr"], 0.0005)
        before = [e for e in tap.snapshot() if e.type == "metric" and e.data["step"] < applied_step]
        assert before and all(math.isclose(e.data["values"]["lr"], 0.002) for e in before)

        client.pause(job["id"])
        paused = tap.wait_for(is_status("paused"), 60, "paused status")
        paused_step = paused.data["step"]
        paused_job = client.get_job(job["id"])
        assert paused_job["status"] == "paused"
        assert paused_job["progress"]["step"] == paused_step  # where it resumes from
        assert paused_step in [c["step"] for c in _checkpoints(client, job["id"])]

        # A change made while paused is applied at the first step after resuming.
        pending = client.set_learning_rate(job["id"], 0.001)
        client.resume(job["id"])
        resumed = tap.wait_for(lambda e: e.type == "lr" and
                               e.data["change_id"] == pending["change_id"], 60, "lr on resume")
        assert resumed.data["applied_step"] == paused_step + 1
        tap.wait_for(is_status("succeeded"), 240, "success")
    finally:
        tap.close()

    final = client.get_job(job["id"])
    assert final["status"] == "succeeded"
    assert final["progress"]["epoch"] == final["spec"]["epochs"]  # epochs completed
    points = list(client.metric_points(job["id"], page_size=7))  # smaller than one step
    keys = [(p["step"], p["name"]) for p in points]
    assert keys == sorted(set(keys))  # every point once, in order, across 7-point pages
    val_epochs = [p["epoch"] for p in points if p["name"] == "val_accuracy"]
    assert val_epochs == list(range(final["spec"]["epochs"]))  # every epoch stored
    val = [e.data["values"]["val_accuracy"] for e in tap.snapshot()
           if e.type == "metric" and "val_accuracy" in e.data["values"]]
    assert val[-1] >= 0.95, val
    history = client.learning_rate(job["id"])
    applied = {c["change_id"]: c for c in history["changes"]}
    assert applied[change["change_id"]]["applied_step"] == applied_step
    checkpoints = _checkpoints(client, job["id"])
    assert 1 <= len(checkpoints) <= 3  # keep_last: 3
    latest = max(checkpoints, key=lambda c: c["step"])
    assert latest["step"] == final["progress"]["step"]
    path = client.download_checkpoint(job["id"], latest["step"], "params.npz",
                                      tmp_path / "params.npz")
    listed = {f["name"]: f for f in latest["files"]}
    assert hashlib.sha256(path.read_bytes()).hexdigest() == listed["params.npz"]["sha256"]
    assert set(listed) == {"params.npz", "trainer.npz", "meta.json"}


def test_cancel_a_running_job(stack: Stack, client: Client) -> None:
    job = client.submit(example_spec(epochs=400, name="to-cancel"))
    tap = EventTap(stack.api_url, stack.token, job["id"])
    try:
        tap.wait_for(metric_at_least(5), 90, "metrics")
        answer = client.cancel(job["id"])
        cancelled = tap.wait_for(is_status("cancelled"), 30, "cancelled status")
        assert cancelled.data.get("command_id") == answer.get("command_id")
    finally:
        tap.close()
    assert client.get_job(job["id"])["status"] == "cancelled"
    with pytest.raises(RudderError) as refused:
        client.resume(job["id"])
    assert refused.value.status == 409


def test_killed_worker_resumes_from_checkpoint_with_identical_weights(
    stack: Stack, client: Client, tmp_path: Path
) -> None:
    # 13,500 steps: the job must still be running when the worker is killed, a moment
    # after its first checkpoint (the digits MLP runs thousands of steps a second)
    spec = example_spec(name="kill-me", epochs=300,
                        checkpoint={"every_steps": 200, "keep_last": 2})
    job = client.submit(spec)
    tap = EventTap(stack.api_url, stack.token, job["id"])
    try:
        checkpoint = tap.wait_for(lambda e: e.type == "checkpoint", 90, "a checkpoint")
        tap.wait_for(metric_at_least(checkpoint.data["step"] + 5), 30, "training past it")
        stack.kill_worker(stack.workers[-1])
        stack.start_worker()
        tap.wait_for(lambda e: e.type == "status" and e.data.get("status") == "queued"
                     and "lease" in (e.data.get("reason") or ""), 60, "watchdog re-queue")
        running_again = len(tap.snapshot())
        tap.wait_for(is_status("succeeded"), 240, "success after the crash")
    finally:
        tap.close()
    first_after = next(e for e in tap.snapshot()[running_again:] if e.type == "metric")
    assert first_after.data["step"] >= checkpoint.data["step"]  # resumed, not restarted
    assert client.get_job(job["id"])["attempts"] == 1

    reference = client.submit(spec)
    wait_until(lambda: client.get_job(reference["id"])["status"] == "succeeded", 240,
               interval=0.5, what="the uninterrupted run")
    resumed = final_params(client, job["id"], tmp_path)
    uninterrupted = final_params(client, reference["id"], tmp_path)
    assert resumed.keys() == uninterrupted.keys()
    for name in resumed:
        assert np.array_equal(resumed[name], uninterrupted[name]), name


def test_worker_stopped_with_sigterm_checkpoints_and_hands_the_job_over(
    stack: Stack, client: Client
) -> None:
    job = client.submit(example_spec(name="graceful", epochs=150))
    tap = EventTap(stack.api_url, stack.token, job["id"])
    try:
        tap.wait_for(metric_at_least(50), 90, "metrics")
        stopping = stack.workers[-1]
        stopping.send_signal(signal.SIGTERM)
        handed_over = tap.wait_for(lambda e: e.type == "status" and e.data.get("status")
                                   == "queued", 30, "re-queue on shutdown")
        assert stopping.wait(timeout=30) == 0
        checkpoints = [c["step"] for c in _checkpoints(client, job["id"])]
        assert handed_over.data["step"] in checkpoints  # checkpointed where it stopped
        stack.start_worker()
        tap.wait_for(is_status("succeeded"), 240, "success on the next worker")
    finally:
        tap.close()
    assert client.get_job(job["id"])["attempts"] == 0  # a hand-over, not a crash
