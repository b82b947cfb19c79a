"""Step-boundary commands over HTTP: recorded with who/when, sent to the worker, refused
with the field named (and nothing recorded), rate-limited, resolved when the job ends.

The worker is not running here: its part (apply, confirm) is played through the
repositories, as tests/api/test_learning_rate.py does for the learning rate.
"""

from __future__ import annotations

from typing import Any

import pytest

from core import repositories
from core.channel import Channel
from core.models import JobStatus
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness

PARAMETERS = [{"name": f"net_dense{i}_{kind}", "shape": [2], "trainable": True}
              for i in range(2) for kind in ("weight", "bias")]


def running_job(api: ApiHarness, headers: dict[str, str], **spec: Any) -> str:
    """A job its worker has started (and published its parameter names for)."""
    job_id = str(api.client.post("/v1/jobs", json=digits_spec(**spec),
                                 headers=headers).json()["id"])
    with api.sessions() as session:
        assert repositories.transition_job(session, job_id=job_id, to_status=JobStatus.RUNNING)
        repositories.set_job_parameters(session, job_id=job_id, parameters=PARAMETERS)
        session.commit()
    return job_id


def _post(api: ApiHarness, headers: dict[str, str], job_id: str, body: dict[str, Any]
          ) -> Any:
    return api.client.post(f"/v1/jobs/{job_id}/commands", json=body, headers=headers)


def test_a_command_is_recorded_with_who_and_sent_to_the_worker(
        api: ApiHarness, redis_url: str) -> None:
    user_id, headers = api.make_user("carol")
    job_id = running_job(api, headers)
    answer = _post(api, headers, job_id, {"type": "set_hyperparameters", "wd": 0.001,
                                          "beta2": 0.99, "checkpoint_before": True})
    assert answer.status_code == 202
    body = answer.json()
    assert (body["kind"], body["status"]) == ("set_hyperparameters", "pending")
    channel = Channel.from_url(redis_url)
    try:
        [sent] = [r.command for r in channel.read_commands(job_id)]
    finally:
        channel.close()
    assert sent.command_id == body["command_id"] and sent.values() == {"wd": 0.001,
                                                                        "beta2": 0.99}
    assert (sent.requested_by, sent.source, sent.checkpoint_before) == (user_id, "user", True)
    shown = api.client.get(f"/v1/jobs/{job_id}/commands/{body['command_id']}",
                           headers=headers).json()
    assert (shown["by"], shown["status"], shown["params"]) == (
        "carol", "pending", {"wd": 0.001, "beta2": 0.99})
    with api.sessions() as session:  # the worker confirms it at its next step boundary
        repositories.mark_command_applied(session, command_id=body["command_id"],
                                          applied_step=42, result={"wd": 0.001})
        session.commit()
    effect = api.client.get(f"/v1/jobs/{job_id}/hyperparameters", headers=headers).json()
    assert effect["optimizer"] == "adam"
    assert effect["values"] == {"wd": 0.001, "beta1": 0.9, "beta2": 0.99, "epsilon": 1e-8,
                                "clip_gradient": 5.0}
    assert [(c["kind"], c["applied_step"]) for c in effect["changes"]] == [
        ("set_hyperparameters", 42)]
    entries = api.client.get(f"/v1/jobs/{job_id}/timeline", headers=headers).json()["entries"]
    [row] = [e for e in entries if e["kind"] == "command"]
    assert (row["step"], row["status"], row["by"], row["command_kind"]) == (
        42, "applied", "carol", "set_hyperparameters")


@pytest.mark.parametrize(("body", "status", "field"), [
    ({"type": "set_hyperparameters", "momentum": 0.9}, 422, "momentum"),  # adam
    ({"type": "set_hyperparameters", "wd": -0.1}, 422, "wd"),
    ({"type": "set_hyperparameters", "wd": True}, 422, "wd"),
    ({"type": "set_hyperparameters", "rescale_grad": 2.0}, 422, "rescale_grad"),
    ({"type": "set_hyperparameters"}, 422, "body"),
    ({"type": "set_hyperparameters", "wd": 0.1, "command_id": "mine"}, 422, "command_id"),
    ({"type": "set_hyperparameters", "lr": 0.1}, 422, "lr"),
    ({"type": "set_schedule", "lr_scheduler": {"type": "cosine"}}, 422, "lr_scheduler"),
    ({"type": "set_schedule", "lr_scheduler": {"type": "poly", "max_update": 10},
      "learning_rate": 50.0}, 422, "learning_rate"),
    ({"type": "freeze", "pattern": "conv"}, 422, "pattern"),
    ({"type": "freeze", "pattern": "("}, 422, "pattern"),
    ({"type": "set_rules", "rules": [{"type": "guard", "factor": 0.5}]}, 422,
     "rules.0.factor"),
    ({"type": "rollback", "step": 7}, 422, "step"),
    ({"type": "stop"}, 422, "type"),
    ({"type": "explode"}, 422, "type"),
])
def test_a_refused_command_names_its_field_and_records_nothing(
        sqlite_api: ApiHarness, redis_url: str, body: dict[str, Any], status: int,
        field: str) -> None:
    api = sqlite_api
    _, headers = api.make_user()
    job_id = running_job(api, headers)
    answer = _post(api, headers, job_id, body)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["details"][0]["field"] == field, error
    assert api.client.get(f"/v1/jobs/{job_id}/commands", headers=headers).json()["data"] == []
    channel = Channel.from_url(redis_url)
    try:
        assert channel.read_commands(job_id) == []
    finally:
        channel.close()


def test_commands_a_jobs_state_refuses_are_409s(sqlite_api: ApiHarness) -> None:
    api = sqlite_api
    _, headers = api.make_user()
    queued = str(api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"])
    answer = _post(api, headers, queued, {"type": "freeze", "pattern": "net_"})
    assert answer.status_code == 409 and "first run" in answer.json()["error"]["message"]
    assert _post(api, headers, queued, {"type": "rollback", "step": 0}).status_code == 409
    assert _post(api, headers, queued, {"type": "evaluate"}).status_code == 202  # at start
    no_val = running_job(api, headers, data={"train": {"builtin": "digits"}})
    assert _post(api, headers, no_val, {"type": "evaluate"}).json()["error"]["details"][0][
        "field"] == "type"
    api.client.post(f"/v1/jobs/{queued}/cancel", headers=headers)
    finished = _post(api, headers, queued, {"type": "checkpoint"})
    assert finished.status_code == 409 and "cancelled job" in finished.json()["error"][
        "message"]


def test_commands_are_rate_limited_together(make_api: Any) -> None:
    api = make_api(commands={"max_changes": 2, "window_seconds": 60})
    _, headers = api.make_user()
    job_id = running_job(api, headers)
    for kind in ("evaluate", "checkpoint"):
        assert _post(api, headers, job_id, {"type": kind}).status_code == 202
    refused = _post(api, headers, job_id, {"type": "set_hyperparameters", "wd": 0.1})
    assert refused.status_code == 429 and "step-boundary commands" in refused.json()[
        "error"]["message"]
    # The learning rate keeps its own window.
    assert api.client.put(f"/v1/jobs/{job_id}/learning-rate", json={"learning_rate": 0.01},
                          headers=headers).status_code == 202


def test_an_lr_change_made_while_the_job_was_being_paused_is_rejected_when_it_is_cancelled(
        api: ApiHarness) -> None:
    """Issue 25 item 10: a change acknowledged while the job was being paused stayed
    pending forever, also after the job was cancelled."""
    _, headers = api.make_user()
    job_id = str(api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"])
    with api.sessions() as session:
        assert repositories.transition_job(session, job_id=job_id, to_status=JobStatus.RUNNING)
        session.commit()
    assert api.client.post(f"/v1/jobs/{job_id}/pause", headers=headers).json()["pending"]
    change = api.client.put(f"/v1/jobs/{job_id}/learning-rate", json={"learning_rate": 0.01},
                            headers=headers).json()
    with api.sessions() as session:  # the worker paused before it read the change
        assert repositories.transition_job(session, job_id=job_id, to_status=JobStatus.PAUSED)
        session.commit()
    assert api.client.post(f"/v1/jobs/{job_id}/cancel", headers=headers).status_code == 202
    [lr] = api.client.get(f"/v1/jobs/{job_id}/learning-rate", headers=headers).json()[
        "changes"]
    assert (lr["change_id"], lr["status"], lr["reason"]) == (change["change_id"], "rejected",
                                                             "job cancelled")


def test_every_pending_command_of_a_job_that_ends_is_rejected_with_why(
        sqlite_api: ApiHarness, redis_url: str) -> None:
    from core.job_status import transition_and_announce

    api = sqlite_api
    _, headers = api.make_user()
    job_id = running_job(api, headers)
    pause = api.client.post(f"/v1/jobs/{job_id}/pause", headers=headers).json()
    freeze = _post(api, headers, job_id, {"type": "freeze", "pattern": "net_dense0"}).json()
    channel = Channel.from_url(redis_url)
    try:
        with api.sessions() as session:  # how the worker ends a run
            assert transition_and_announce(session, channel, job_id=job_id,
                                           to_status=JobStatus.SUCCEEDED,
                                           from_statuses=[JobStatus.RUNNING], reason=None)
        events = [(e.type, e.data) for e in channel.read_events(job_id)]
    finally:
        channel.close()
    rows = {c["command_id"]: c for c in api.client.get(
        f"/v1/jobs/{job_id}/commands", headers=headers).json()["data"]}
    assert {(r["status"], r["reason"]) for r in rows.values()} == {("rejected",
                                                                    "job succeeded")}
    assert set(rows) == {pause["command_id"], freeze["command_id"]}
    # Announced before the terminal status (a stream ends after that one).
    assert [t for t, _ in events] == ["command", "command", "status"]
    assert events[1][1]["command_id"] == freeze["command_id"]
