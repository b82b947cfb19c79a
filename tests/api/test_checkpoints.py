from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import pytest

from core import repositories
from core.config import Settings
from core.storage import CHECKPOINT_FILES, checkpoint_prefix, open_store
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness, serve


def _write_checkpoint(api: ApiHarness, job_id: str, step: int) -> dict[str, bytes]:
    """What a worker does: files first, meta.json last, then the DB row."""
    settings = api.settings
    store = open_store(settings.storage_url, endpoint_url=settings.s3_endpoint_url)
    prefix = checkpoint_prefix(job_id, step)
    blobs = {
        "params.npz": b"params-" + bytes(range(256)) * 40,
        "trainer.npz": b"trainer-" + bytes(step % 256 for _ in range(5000)),
    }
    blobs["meta.json"] = json.dumps({"step": step, "epoch": 1}).encode()
    files = {}
    for name in CHECKPOINT_FILES:
        store.put(prefix + name, blobs[name])
        files[name] = {"sha256": hashlib.sha256(blobs[name]).hexdigest(), "size": len(blobs[name])}
    with api.sessions() as session:
        repositories.add_checkpoint(
            session, job_id=job_id, step=step, epoch=1, key_prefix=prefix, files=files
        )
        session.commit()
    return blobs


def _check_download(api: ApiHarness) -> None:
    _, headers = api.make_user()
    job_id = api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"]
    first = _write_checkpoint(api, job_id, 200)
    _write_checkpoint(api, job_id, 400)
    listed = api.client.get(f"/v1/jobs/{job_id}/checkpoints", headers=headers).json()["data"]
    assert [c["step"] for c in listed] == [200, 400]
    checkpoint = listed[0]
    assert checkpoint["sha256"] == hashlib.sha256(first["params.npz"]).hexdigest()
    assert checkpoint["size"] == sum(len(b) for b in first.values())
    for entry in checkpoint["files"]:
        response = api.client.get(entry["url"], headers=headers)
        assert response.status_code == 200
        assert response.content == first[entry["name"]]
        assert hashlib.sha256(response.content).hexdigest() == entry["sha256"]
        assert response.headers["x-checksum-sha256"] == entry["sha256"]


def test_list_and_download_from_local_store(api: ApiHarness) -> None:
    _check_download(api)


def test_list_and_download_from_s3(
    make_settings: Callable[..., Settings], s3_endpoint: str, s3_storage_url: str
) -> None:
    settings = make_settings(storage_url=s3_storage_url, s3_endpoint_url=s3_endpoint)
    with serve(settings) as api:
        _check_download(api)


@pytest.mark.parametrize("path", ["200/files/secrets.txt", "999/files/params.npz"])
def test_unknown_checkpoint_or_file_is_refused(api: ApiHarness, path: str) -> None:
    _, headers = api.make_user()
    job_id = api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"]
    _write_checkpoint(api, job_id, 200)
    response = api.client.get(f"/v1/jobs/{job_id}/checkpoints/{path}", headers=headers)
    assert response.status_code in (404, 422)
    assert "error" in response.json()


class TestDeleteJob:
    """Issue 15: DELETE /v1/jobs/{id} for a finished job removes its rows and its
    checkpoints in object storage; any other status is a 409 that changes nothing."""

    def _job_with_checkpoints(self, api: ApiHarness) -> tuple[str, dict[str, str]]:
        _, headers = api.make_user()
        job_id = api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"]
        _write_checkpoint(api, job_id, 200)
        _write_checkpoint(api, job_id, 400)
        with api.sessions() as session:
            repositories.add_metric_points(session, job_id=job_id, points=[
                repositories.MetricPointIn(step=1, epoch=0, name="lr", value=0.1,
                                           time=None),
            ])
            session.commit()
        return job_id, headers

    def test_a_finished_job_and_its_checkpoints_are_deleted(self, api: ApiHarness) -> None:
        from core.models import JobStatus

        job_id, headers = self._job_with_checkpoints(api)
        with api.sessions() as session:
            repositories.transition_job(session, job_id=job_id, to_status=JobStatus.SUCCEEDED)
            session.commit()
        store = open_store(api.settings.storage_url, endpoint_url=api.settings.s3_endpoint_url)
        assert len(store.list(f"jobs/{job_id}/")) == 6
        response = api.client.delete(f"/v1/jobs/{job_id}", headers=headers)
        assert response.status_code == 204, response.text
        assert api.client.get(f"/v1/jobs/{job_id}", headers=headers).status_code == 404
        assert store.list(f"jobs/{job_id}/") == []
        with api.sessions() as session:
            assert repositories.list_checkpoints(session, job_id=job_id) == []
            assert repositories.list_metric_points(session, job_id=job_id) == []
        assert api.client.delete(f"/v1/jobs/{job_id}", headers=headers).status_code == 404

    def test_an_unfinished_job_is_a_409_and_keeps_everything(self, api: ApiHarness) -> None:
        job_id, headers = self._job_with_checkpoints(api)
        response = api.client.delete(f"/v1/jobs/{job_id}", headers=headers)
        assert response.status_code == 409
        assert response.json()["error"]["code"] == "invalid_state"
        listed = api.client.get(f"/v1/jobs/{job_id}/checkpoints", headers=headers).json()
        assert [c["step"] for c in listed["data"]] == [200, 400]

    def test_another_users_job_cannot_be_deleted(self, api: ApiHarness) -> None:
        job_id, _ = self._job_with_checkpoints(api)
        _, stranger = api.make_user()
        assert api.client.delete(f"/v1/jobs/{job_id}", headers=stranger).status_code == 404


def test_integers_beyond_int64_are_a_422_not_a_database_overflow(api: ApiHarness) -> None:
    """Issue 14: a step or after_step of 2**63 reached the database and gave a 500."""
    _, headers = api.make_user()
    job_id = api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"]
    too_big = 2**63
    file_url = f"/v1/jobs/{job_id}/checkpoints/{too_big}/files/params.npz"
    assert api.client.get(file_url, headers=headers).status_code == 422
    metrics = api.client.get(f"/v1/jobs/{job_id}/metrics", params={"after_step": 2**64},
                             headers=headers)
    assert metrics.status_code == 422
    assert metrics.json()["error"]["details"][0]["field"] == "after_step"
    assert api.client.get(f"/v1/jobs/{job_id}/checkpoints/{too_big - 1}/files/params.npz",
                          headers=headers).status_code == 404
