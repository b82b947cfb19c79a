"""Steering beyond the learning rate with real API and worker processes (issue 24):
every command on a running job confirmed with its step, commands kept for a paused job
and applied at resume, rollback continuing as an uninterrupted run would, a fork running
from an old checkpoint while its parent trains, rules firing on a real run (plateau and
early stop; the guard's pause)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rudder.client import Client
from tests.e2e.conftest import example_spec, final_params
from tests.e2e.events import EventTap, is_status, metric_at_least
from tests.e2e.harness import Stack
from tests.services import wait_until

pytestmark = pytest.mark.slow


def _confirmed(tap: EventTap, command_id: str, timeout: float = 30) -> dict[str, Any]:
    event = tap.wait_for(lambda e: e.type in ("command", "lr") and command_id in (
        e.data.get("command_id"), e.data.get("change_id")), timeout, f"command {command_id}")
    assert event.data["status"] == "applied", event.data
    return dict(event.data)


def test_every_command_on_a_running_job_is_confirmed_with_its_step(
        stack: Stack, client: Client) -> None:
    job = client.submit(example_spec(name="steered", epochs=400))
    tap = EventTap(stack.api_url, stack.token, job["id"])
    try:
        tap.wait_for(metric_at_least(20), 90, "first metrics")
        bodies = (
            {"type": "set_hyperparameters", "wd": 0.001, "beta1": 0.85, "clip_gradient": 0},
            {"type": "set_schedule", "lr_scheduler": {"type": "factor", "step": 50,
                                                      "factor": 0.5},
             "learning_rate": 0.004},
            {"type": "freeze", "pattern": "net_dense0_", "checkpoint_before": True},
            {"type": "evaluate"},
            {"type": "unfreeze", "pattern": "net_dense0_"},
            {"type": "checkpoint"},
            {"type": "set_rules", "rules": [{"type": "reduce_on_plateau", "patience": 1000}]},
        )
        sent = [client.send_command(job["id"], body) for body in bodies]
        steps = [_confirmed(tap, s["command_id"])["step"] for s in sent]
        # A change is confirmed with the first step that runs with it, an evaluate or a
        # checkpoint with the step it ran after: both name the boundary they were carried
        # out at, and those follow the order sent.
        boundaries = [step - (body["type"] not in ("evaluate", "checkpoint"))
                      for step, body in zip(steps, bodies, strict=True)]
        assert boundaries == sorted(boundaries)
        schedule = _confirmed(tap, sent[1]["command_id"])
        assert schedule["result"]["learning_rate"] == pytest.approx(0.004)
        after = tap.wait_for(metric_at_least(schedule["step"] + 1), 30, "metrics after")
        if after.data["step"] < schedule["step"] + 50:
            assert after.data["values"]["lr"] == pytest.approx(0.004)
        evaluated = _confirmed(tap, sent[3]["command_id"])
        assert set(evaluated["result"]["values"]) >= {"val_accuracy", "val_loss"}
        checkpoint = _confirmed(tap, sent[5]["command_id"])
        checkpoints = [c["step"] for c in client.checkpoints(job["id"])["data"]]
        assert checkpoint["result"]["checkpoint_step"] in checkpoints
        assert steps[2] - 1 in checkpoints  # checkpoint_before the freeze
        effect = client.hyperparameters(job["id"])
        assert effect["values"] == {"wd": 0.001, "beta1": 0.85, "beta2": 0.999,
                                    "epsilon": 1e-8, "clip_gradient": 0.0}
        assert effect["frozen"] == [] and effect["schedule"]["type"] == "factor"
        assert [r["type"] for r in effect["rules"]] == ["reduce_on_plateau"]

        # A paused job keeps what it is sent and applies it when it resumes.
        client.pause(job["id"])
        paused = tap.wait_for(is_status("paused"), 60, "paused")
        waiting = client.send_command(job["id"], {"type": "set_hyperparameters", "wd": 0.002})
        assert client.command(job["id"], waiting["command_id"])["status"] == "pending"
        client.resume(job["id"])
        resumed = _confirmed(tap, waiting["command_id"], 60)
        assert resumed["step"] == paused.data["step"] + 1
        client.cancel(job["id"])
        tap.wait_for(is_status("cancelled"), 60, "cancelled")
    finally:
        tap.close()
    timeline = client.timeline(job["id"])["entries"]
    marked = [e for e in timeline if e["kind"] == "command" and e["status"] == "applied"]
    assert len(marked) >= 8 and all(e["step"] is not None and e["by"] for e in marked)


def test_a_rollback_continues_exactly_as_a_run_resumed_from_that_checkpoint(
        stack: Stack, client: Client, tmp_path: Path) -> None:
    # Long enough (9,000 steps) that the job is still running when the rollback arrives:
    # the digits MLP takes thousands of steps a second, and at 30 epochs it once finished
    # first on CI, which refused the rollback ("job succeeded") as it should.
    # keep_last at the maximum: the checkpoint rolled back to must still be kept then.
    spec = example_spec(name="rewound", epochs=200,
                        checkpoint={"every_steps": 150, "keep_last": 100})
    job = client.submit(spec)
    tap = EventTap(stack.api_url, stack.token, job["id"])
    try:
        first = tap.wait_for(lambda e: e.type == "checkpoint", 90, "a checkpoint")
        tap.wait_for(metric_at_least(first.data["step"] + 100), 60, "training past it")
        # A change after the checkpoint: the rollback discards it with its branch.
        changed = client.send_command(job["id"], {"type": "set_hyperparameters", "wd": 0.5})
        _confirmed(tap, changed["command_id"])
        rollback = client.rollback(job["id"], first.data["step"])
        done = _confirmed(tap, rollback["command_id"], 60)
        assert done["result"]["to_step"] == first.data["step"] and done["result"]["branch"] == 1
        tap.wait_for(is_status("succeeded"), 240, "success after the rollback")
    finally:
        tap.close()
    abandoned = list(client.abandoned_points(job["id"]))
    assert abandoned and min(p["step"] for p in abandoned) > first.data["step"]
    assert {p["branch"] for p in abandoned} == {1}
    assert client.command(job["id"], changed["command_id"])["abandoned"] is True
    points = list(client.metric_points(job["id"], page_size=5000))
    keys = [(p["step"], p["name"]) for p in points]
    assert keys == sorted(set(keys))  # one live history, no leftovers of the branch

    reference = client.submit(spec)
    wait_until(lambda: client.get_job(reference["id"])["status"] == "succeeded", 240,
               interval=0.5, what="the uninterrupted run")
    rewound, uninterrupted = final_params(client, job["id"], tmp_path), final_params(
        client, reference["id"], tmp_path)
    assert rewound.keys() == uninterrupted.keys()
    for name in rewound:
        assert np.array_equal(rewound[name], uninterrupted[name]), name


def test_a_fork_from_an_old_checkpoint_trains_while_its_parent_runs(
        stack: Stack, client: Client) -> None:
    second = stack.start_worker()  # the parent keeps one worker busy
    parent = client.submit(example_spec(name="parent", epochs=400,
                                        checkpoint={"every_steps": 100, "keep_last": 5}))
    tap = EventTap(stack.api_url, stack.token, parent["id"])
    try:
        old = tap.wait_for(lambda e: e.type == "checkpoint", 90, "a checkpoint")
        tap.wait_for(lambda e: e.type == "checkpoint" and e.data["step"] > old.data["step"],
                     90, "a later checkpoint")
        before = [c["step"] for c in client.checkpoints(parent["id"])["data"]]
        epochs = old.data["epoch"] + 3
        child = client.fork(parent["id"], step=old.data["step"], overrides={
            "name": "child", "epochs": epochs, "optimizer": {"wd": 0.001}})
        child_tap = EventTap(stack.api_url, stack.token, child["id"])
        try:
            child_tap.wait_for(is_status("succeeded"), 120, "the child's success")
        finally:
            child_tap.close()
        assert client.get_job(parent["id"])["status"] == "running"  # the parent trains on
        metrics = [e.data["step"] for e in child_tap.snapshot() if e.type == "metric"]
        # It went on from the checkpoint. (A checkpoint taken at an epoch's last batch,
        # before that epoch's validation, gives the child that epoch-end point at the
        # fork step itself.)
        assert metrics and min(metrics) >= old.data["step"] and max(metrics) > old.data["step"]
        [override] = client.commands(child["id"])["data"]
        assert (override["source"], override["status"], override["applied_step"]) == (
            "fork", "applied", old.data["step"] + 1)
        finished = client.get_job(child["id"])
        assert finished["progress"]["epoch"] == epochs
        assert finished["parent_id"] == parent["id"]
        child_steps = [c["step"] for c in client.checkpoints(child["id"])["data"]]
        assert max(child_steps) == finished["progress"]["step"]
        after = [c["step"] for c in client.checkpoints(parent["id"])["data"]]
        assert set(before) - set(after) <= set(before[:2])  # only its own pruning
        assert client.lineage(parent["id"])["children"][0]["id"] == child["id"]
        client.cancel(parent["id"])
        tap.wait_for(is_status("cancelled"), 60, "the parent cancelled")
    finally:
        tap.close()
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=30)
        stack.workers.remove(second)


def _submit_until(stack: Stack, client: Client, spec: dict[str, Any], status: str,
                  timeout: float, what: str) -> tuple[dict[str, Any], EventTap, Any]:
    """Submit ``spec`` and follow its events until it reaches ``status``: (the job, its
    closed tap, whose snapshot keeps what it saw, the status event)."""
    job = client.submit(spec)
    tap = EventTap(stack.api_url, stack.token, job["id"])
    try:
        event = tap.wait_for(is_status(status), timeout, what)
    finally:
        tap.close()
    return job, tap, event


def test_rules_reduce_the_learning_rate_then_stop_the_job_early(
        stack: Stack, client: Client) -> None:
    # min_delta larger than any change: every validation after the first is "no better".
    rules = [{"type": "reduce_on_plateau", "name": "plateau", "patience": 1,
              "factor": 0.5, "min_delta": 1000.0},
             {"type": "early_stop", "name": "stopper", "patience": 3, "min_delta": 1000.0}]
    job, tap, done = _submit_until(stack, client, example_spec(
        name="ruled", epochs=50, rules=rules), "succeeded", 240, "the early stop")
    assert "stopped early by rule stopper" in (done.data.get("reason") or "")
    final = client.get_job(job["id"])
    assert final["progress"]["epoch"] == 4 < 50
    by_rule = [c for c in client.commands(job["id"])["data"] if c["source"] == "rule"]
    assert [(c["kind"], c["by"], c["status"]) for c in by_rule] == [
        ("set_lr", "rule plateau", "applied"), ("set_lr", "rule plateau", "applied"),
        ("set_lr", "rule plateau", "applied"), ("stop", "rule stopper", "applied")]
    lrs = [c["result"]["learning_rate"] for c in by_rule[:3]]
    assert lrs == pytest.approx([0.001, 0.0005, 0.00025])
    lr_events = [e for e in tap.snapshot() if e.type == "lr"]
    assert len(lr_events) == 3 and all(e.data["status"] == "applied" for e in lr_events)


def test_the_guard_pauses_a_job_whose_loss_grows_with_a_checkpoint(
        stack: Stack, client: Client) -> None:
    """A guard checking the running training loss every 10 steps, with a factor just over
    1, fires at the first check (every 10 steps, or a validation) where the loss is above
    its lowest: the job pauses at that step with a checkpoint there, and the pause is
    audited as the rule's."""
    rules = [{"type": "guard", "name": "watch", "factor": 1.0001, "within_steps": 10**6,
              "every_steps": 10}]
    job, _, paused = _submit_until(stack, client, example_spec(
        name="guarded", epochs=50, rules=rules), "paused", 120, "the guard's pause")
    [pause] = [c for c in client.commands(job["id"])["data"] if c["source"] == "rule"]
    assert (pause["kind"], pause["by"], pause["status"]) == ("pause", "rule watch", "applied")
    assert pause["applied_step"] == paused.data["step"]
    assert "watch" in (paused.data.get("reason") or "")
    checkpoints = [c["step"] for c in client.checkpoints(job["id"])["data"]]
    assert pause["applied_step"] in checkpoints
    client.cancel(job["id"])
