"""Fork and rollback over HTTP, on checkpoints written the way a worker writes them.

(The training that continues from them is tests/e2e/test_steering.py's.)
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from core import repositories
from core.commands import SetHyperparametersCommand
from core.models import JobStatus
from core.storage import ObjectStore, checkpoint_file_key, checkpoint_prefix, open_store
from tests.api.specs import digits_spec
from tests.api.test_commands import running_job
from tests.conftest import ApiHarness


def _store(api: ApiHarness) -> ObjectStore:
    return open_store(api.settings.storage_url)


def _checkpoint(api: ApiHarness, job_id: str, step: int, epoch: int,
                applied: list[str]) -> None:
    """A complete checkpoint at ``step`` (files, then meta.json, then the row)."""
    store = _store(api)
    files = {}
    for name in ("params.npz", "trainer.npz"):
        data = f"{name} of {job_id} at {step}".encode()
        store.put(checkpoint_file_key(job_id, step, name), data)  # type: ignore[arg-type]
        files[name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    meta = {"job_id": job_id, "step": step, "epoch": epoch, "batch_index": 3, "data_seed": 1,
            "rng_state": [1], "files": files, "learning_rate": 0.001, "created_at": 0.0,
            "steering": {"applied": applied}, "version": 1}
    store.put(checkpoint_file_key(job_id, step, "meta.json"), json.dumps(meta).encode())
    with api.sessions() as session:
        repositories.add_checkpoint(session, job_id=job_id, step=step, epoch=epoch,
                                    key_prefix=checkpoint_prefix(job_id, step), files=files)
        session.commit()


def _history(api: ApiHarness, job_id: str, user_id: str) -> dict[str, str]:
    """Metric points at steps 1..30; a command applied at step 5 (in the checkpoint at 10)
    and one at 15 (after it); checkpoints at 10 and 20. Returns the commands' ids."""
    with api.sessions() as session:
        repositories.add_metric_points(session, job_id=job_id, points=[
            repositories.MetricPointIn(step=s, epoch=s // 10, name="train_loss", value=1 / s)
            for s in range(1, 31)])
        ids = {}
        for name, step in (("early", 5), ("late", 15)):
            command = SetHyperparametersCommand(wd=0.001 * step, requested_by=user_id)
            repositories.create_command(session, job_id=job_id, command=command)
            repositories.mark_command_applied(session, command_id=command.command_id,
                                              applied_step=step)
            ids[name] = command.command_id
        session.commit()
    _checkpoint(api, job_id, 10, 1, [ids["early"]])
    _checkpoint(api, job_id, 20, 2, [ids["early"], ids["late"]])
    return ids


def test_a_paused_job_rolls_back_at_once_keeping_its_abandoned_branch(
        api: ApiHarness) -> None:
    user_id, headers = api.make_user()
    job_id = running_job(api, headers)
    ids = _history(api, job_id, user_id)
    with api.sessions() as session:
        assert repositories.transition_job(session, job_id=job_id, to_status=JobStatus.PAUSED)
        session.commit()
    missing = api.client.post(f"/v1/jobs/{job_id}/rollback", json={"step": 15},
                              headers=headers)
    assert missing.status_code == 422 and missing.json()["error"]["details"][0]["field"] == (
        "step")
    answer = api.client.post(f"/v1/jobs/{job_id}/rollback", json={"step": 10},
                             headers=headers).json()
    assert (answer["status"], answer["applied_step"]) == ("applied", 10)

    points = api.client.get(f"/v1/jobs/{job_id}/metrics", headers=headers).json()["points"]
    assert [p["step"] for p in points] == list(range(1, 11))
    abandoned = api.client.get(f"/v1/jobs/{job_id}/metrics/abandoned?limit=7",
                               headers=headers).json()
    assert [(p["branch"], p["step"]) for p in abandoned["points"]] == [
        (1, s) for s in range(11, 18)]
    rest = api.client.get(f"/v1/jobs/{job_id}/metrics/abandoned?cursor="
                          f"{abandoned['next_cursor']}", headers=headers).json()
    assert [p["step"] for p in rest["points"]] == list(range(18, 31))
    series = api.client.get(f"/v1/jobs/{job_id}/metrics/series?include_abandoned=true",
                            headers=headers).json()["series"]
    assert [(s["name"], s["branch"], s["abandoned"], s["total_points"]) for s in series] == [
        ("train_loss", 0, False, 10), ("train_loss", 1, True, 20)]
    assert [c["step"] for c in api.client.get(f"/v1/jobs/{job_id}/checkpoints",
                                              headers=headers).json()["data"]] == [10]
    store = _store(api)
    assert store.list(checkpoint_prefix(job_id, 20)) == []
    commands = {c["command_id"]: c for c in api.client.get(
        f"/v1/jobs/{job_id}/commands", headers=headers).json()["data"]}
    assert commands[ids["early"]]["abandoned"] is False  # in the checkpoint's state
    assert commands[ids["late"]]["abandoned"] is True  # not: never replayed
    effect = api.client.get(f"/v1/jobs/{job_id}/hyperparameters", headers=headers).json()
    assert effect["values"]["wd"] == pytest.approx(0.005)
    job = api.client.get(f"/v1/jobs/{job_id}", headers=headers).json()
    assert (job["status"], job["progress"]["step"], job["branch"]) == ("paused", 10, 1)
    lineage = api.client.get(f"/v1/jobs/{job_id}/lineage", headers=headers).json()
    assert [(r["branch"], r["to_step"], r["abandoned_points"]) for r in lineage["rollbacks"]
            ] == [(1, 10, 20)]


def test_a_running_job_is_told_to_roll_back_at_its_next_step(api: ApiHarness) -> None:
    user_id, headers = api.make_user()
    job_id = running_job(api, headers)
    _history(api, job_id, user_id)
    answer = api.client.post(f"/v1/jobs/{job_id}/rollback", json={"step": 20},
                             headers=headers).json()
    assert answer["status"] == "pending"  # its worker rewinds it
    points = api.client.get(f"/v1/jobs/{job_id}/metrics", headers=headers).json()["points"]
    assert len(points) == 30


def _fork(api: ApiHarness, headers: dict[str, str], job_id: str, **body: Any) -> Any:
    return api.client.post(f"/v1/jobs/{job_id}/fork", json=body, headers=headers)


@pytest.mark.parametrize(("overrides", "field"), [
    ({"model": [{"type": "Dense", "units": 3}]}, "overrides.model"),
    ({"optimizer": {"type": "sgd"}}, "overrides.optimizer.type"),
    ({"optimizer": {"momentum": 0.9}}, "overrides.optimizer.momentum"),  # adam
    ({"optimizer": {"wd": -1.0}}, "overrides.optimizer.wd"),
    ({"optimizer": {"lazy_update": False}}, "overrides.optimizer.lazy_update"),
    ({"data": {"train": {"builtin": "iris"}}}, "overrides.data.train"),
    ({"data": {"batch_size": 0}}, "overrides.data.batch_size"),
    ({"epochs": 1}, "overrides.epochs"),
    ({"seed": 3}, "overrides.seed"),
    ({"lr_scheduler": {"type": "cosine"}}, "overrides.lr_scheduler"),
    ({"rules": [{"type": "early_stop", "patience": -1}]}, "overrides.rules.0.patience"),
    ({"colour": "blue"}, "overrides.colour"),
])
def test_a_fork_that_cannot_continue_from_the_checkpoint_is_refused(
        sqlite_api: ApiHarness, overrides: dict[str, Any], field: str) -> None:
    api = sqlite_api
    user_id, headers = api.make_user()
    job_id = running_job(api, headers)
    _history(api, job_id, user_id)
    answer = _fork(api, headers, job_id, step=20, overrides=overrides)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["details"][0]["field"] == field
    jobs = api.client.get("/v1/jobs", headers=headers).json()["data"]
    assert [j["id"] for j in jobs] == [job_id]  # nothing created


def test_a_fork_starts_from_a_copy_of_the_parents_checkpoint(api: ApiHarness) -> None:
    user_id, headers = api.make_user()
    parent = running_job(api, headers)
    _history(api, parent, user_id)
    assert _fork(api, headers, parent, step=15).json()["error"]["details"][0]["field"] == "step"
    answer = _fork(api, headers, parent, step=10, overrides={
        "name": "wd-trial", "epochs": 20, "optimizer": {"wd": 0.01, "learning_rate": 0.002},
        "lr_scheduler": {"type": "poly", "max_update": 500}, "data": {"batch_size": 32},
        "rules": [{"type": "early_stop", "patience": 4}]})
    assert answer.status_code == 201, answer.text
    child = answer.json()
    assert answer.headers["location"] == f"/v1/jobs/{child['id']}"
    assert (child["parent_id"], child["fork_step"], child["status"]) == (parent, 10, "queued")
    assert (child["name"], child["spec"]["epochs"], child["spec"]["data"]["batch_size"]) == (
        "wd-trial", 20, 32)
    assert child["progress"]["step"] == 10 and child["progress"]["epoch"] == 1
    # Steering overrides are the child's first commands (its trainer state would undo a
    # spec value), pending until it starts.
    commands = api.client.get(f"/v1/jobs/{child['id']}/commands", headers=headers).json()
    assert [(c["kind"], c["source"], c["by"], c["status"]) for c in commands["data"]] == [
        ("set_hyperparameters", "fork", "fork", "pending"),
        ("set_schedule", "fork", "fork", "pending"),
        ("set_rules", "fork", "fork", "pending")]
    assert commands["data"][1]["params"]["learning_rate"] == 0.002
    store = _store(api)
    meta = json.loads(store.get(checkpoint_file_key(child["id"], 10, "meta.json")))
    assert meta["job_id"] == child["id"] and meta["steering"]["applied"]
    assert meta["batch_index"] == 6  # 3 batches of 64 done: 6 of the child's 32
    for name in ("params.npz", "trainer.npz"):
        assert store.get(checkpoint_file_key(child["id"], 10, name)) == store.get(
            checkpoint_file_key(parent, 10, name))  # type: ignore[arg-type]
    [row] = api.client.get(f"/v1/jobs/{child['id']}/checkpoints", headers=headers).json()[
        "data"]
    assert row["step"] == 10
    lineage = api.client.get(f"/v1/jobs/{parent}/lineage", headers=headers).json()
    assert [(c["id"], c["fork_step"]) for c in lineage["children"]] == [(child["id"], 10)]
    back = api.client.get(f"/v1/jobs/{child['id']}/lineage", headers=headers).json()
    assert (back["parent"]["id"], back["parent"]["exists"]) == (parent, True)
    # The parent is untouched: its points, checkpoints and commands are as they were.
    assert len(api.client.get(f"/v1/jobs/{parent}/metrics", headers=headers).json()[
        "points"]) == 30
    assert [c["step"] for c in api.client.get(f"/v1/jobs/{parent}/checkpoints",
                                              headers=headers).json()["data"]] == [10, 20]
    latest = _fork(api, headers, parent, overrides={"epochs": 30}).json()
    assert latest["fork_step"] == 20  # no step: the latest checkpoint
    other = api.make_user()[1]
    assert _fork(api, other, parent).status_code == 404


def test_a_job_without_checkpoints_cannot_be_forked(sqlite_api: ApiHarness) -> None:
    _, headers = sqlite_api.make_user()
    job_id = str(sqlite_api.client.post("/v1/jobs", json=digits_spec(),
                                        headers=headers).json()["id"])
    answer = _fork(sqlite_api, headers, job_id)
    assert answer.status_code == 409
