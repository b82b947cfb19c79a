from __future__ import annotations

from typing import Any

from tests.api.specs import digits_spec
from tests.conftest import ApiHarness, free_port, serve


def test_healthz(api: ApiHarness) -> None:
    assert api.client.get("/healthz").json() == {"status": "ok"}


def test_readyz_checks_database_redis_and_storage(api: ApiHarness) -> None:
    response = api.client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ready", "checks": {"database": "ok", "redis": "ok", "storage": "ok"}
    }


def test_readyz_reports_a_dead_redis(make_settings: Any) -> None:
    settings = make_settings(redis_url=f"redis://127.0.0.1:{free_port()}/0")
    with serve(settings) as api:
        response = api.client.get("/readyz")
        assert response.status_code == 503
        body = response.json()
        assert body["checks"]["redis"].startswith("error")
        assert body["checks"]["database"] == "ok"
        # submitting still stores the job; the watchdog re-enqueues it later
        _, headers = api.make_user()
        assert api.client.post("/v1/jobs", json=digits_spec(), headers=headers).status_code == 201


def test_prometheus_metrics_count_requests(api: ApiHarness) -> None:
    _, headers = api.make_user()
    api.client.post("/v1/jobs", json=digits_spec(), headers=headers)
    text = api.client.get("/metrics").text
    assert 'rudder_http_requests_total{method="POST",route="/v1/jobs",status="201"}' in text
    assert "rudder_jobs_submitted_total" in text


def test_auth_can_be_switched_off_for_local_use(make_settings: Any) -> None:
    with serve(make_settings(auth_enabled=False)) as api:
        response = api.client.post("/v1/jobs", json=digits_spec())
        assert response.status_code == 201
        assert api.client.get("/v1/jobs").json()["data"][0]["id"] == response.json()["id"]


def _job_with_a_checkpoint_row(api: Any, headers: dict[str, str], key_prefix: str) -> str:
    from core import repositories

    job_id = str(api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"])
    with api.sessions() as session:
        repositories.add_checkpoint(
            session, job_id=job_id, step=1, epoch=0, key_prefix=key_prefix,
            files={"params.npz": {"sha256": "00", "size": 1}},
        )
        session.commit()
    return job_id


def test_unreachable_storage_is_a_503_without_internals(
    make_settings: Any, monkeypatch: Any
) -> None:
    """Issue 14: a dependency that fails (here nothing listens at the S3 endpoint) is a
    retryable 503 in the standard error body, not a 500 or a stack trace."""
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    settings = make_settings(
        storage_url="s3://bucket/x", s3_endpoint_url=f"http://127.0.0.1:{free_port()}"
    )
    with serve(settings) as api:
        _, headers = api.make_user()
        job_id = _job_with_a_checkpoint_row(api, headers, "jobs/x/")
        response = api.client.get(
            f"/v1/jobs/{job_id}/checkpoints/1/files/params.npz", headers=headers
        )
        assert response.status_code == 503
        assert int(response.headers["Retry-After"]) >= 1
        assert response.json() == {
            "error": {"code": "unavailable",
                      "message": "object storage is not answering; retry shortly",
                      "details": None}
        }
        assert api.client.get("/readyz").json()["checks"]["storage"].startswith("error")


def test_unexpected_errors_are_json_500_without_internals(
    make_settings: Any, tmp_path: Any
) -> None:
    """A storage backend failing in an unforeseen way (a file where its folder should be)
    gives the standard error body, not a stack trace."""
    with serve(make_settings(storage_url=f"file://{tmp_path / 'objects'}")) as api:
        _, headers = api.make_user()
        job_id = _job_with_a_checkpoint_row(api, headers, "jobs/not-a-folder/")
        (tmp_path / "objects" / "jobs").mkdir(parents=True, exist_ok=True)
        (tmp_path / "objects" / "jobs" / "not-a-folder").write_bytes(b"x")
        response = api.client.get(
            f"/v1/jobs/{job_id}/checkpoints/1/files/params.npz", headers=headers
        )
        assert response.status_code == 500
        assert response.json() == {
            "error": {"code": "internal_error", "message": "internal server error",
                      "details": None}
        }
