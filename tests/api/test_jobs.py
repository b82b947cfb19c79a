from __future__ import annotations

import base64
import json
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from core import repositories
from core.models import JobStatus
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness, wait_for


def _celery_messages(redis_url: str, queue: str) -> list[bytes]:
    client = redis.Redis.from_url(redis_url)
    try:
        return list(client.lrange(queue, 0, -1))
    finally:
        client.close()


def _wait_for_message(redis_url: str, queue: str, job_id: str) -> bytes:
    """The api sends after commit from a background thread: wait for it to arrive."""
    return wait_for(
        lambda: next((m for m in _celery_messages(redis_url, queue) if job_id.encode() in m), None),
        timeout=10,
        what=f"rudder.train({job_id}) on queue {queue}",
    )


def _task_job_id(message: bytes) -> str:
    """The job id a Celery (protocol 2) ``rudder.train`` message carries."""
    envelope = json.loads(message)
    args, _kwargs, _embed = json.loads(base64.b64decode(envelope["body"]))
    return str(args[0])


class TestSubmit:
    def test_submit_stores_job_and_enqueues_task_by_name(
        self, api: ApiHarness, redis_url: str
    ) -> None:
        _, headers = api.make_user()
        response = api.client.post("/v1/jobs", json=digits_spec(), headers=headers)
        assert response.status_code == 201, response.text
        job = response.json()
        assert job["status"] == "queued"
        assert job["queue"] == "cpu"
        # the lr in effect at step 0: the cosine schedule's warmup starts at 0 (issue 26)
        assert job["progress"] == {
            "epoch": 0, "step": 0, "current_lr": 0.0, "metrics": {}
        }
        assert response.headers["location"] == f"/v1/jobs/{job['id']}"
        message = _wait_for_message(redis_url, "cpu", job["id"])
        assert b"rudder.train" in message

    def test_submit_answer_is_the_stored_job_with_its_first_status_row(
        self, api: ApiHarness
    ) -> None:
        _, headers = api.make_user()
        submitted = api.client.post("/v1/jobs", json=digits_spec(), headers=headers)
        assert submitted.status_code == 201
        job = submitted.json()
        stored = api.client.get(f"/v1/jobs/{job['id']}", headers=headers).json()
        assert stored == job  # every field, timestamps included, as the database has it
        with api.sessions() as session:
            events = repositories.list_status_events(session, job_id=job["id"])
            assert [(e.status, e.reason) for e in events] == [("queued", "submitted")]
            assert events[0].created_at == repositories.get_job(
                session, job_id=job["id"]
            ).created_at  # type: ignore[union-attr]

    def test_a_burst_of_submits_enqueues_every_job_once(
        self, api: ApiHarness, redis_url: str
    ) -> None:
        _, headers = api.make_user()
        with ThreadPoolExecutor(max_workers=8) as pool:
            responses = list(pool.map(
                lambda i: api.client.post(
                    "/v1/jobs", json=digits_spec(name=f"burst-{i}"), headers=headers
                ),
                range(24),
            ))
        assert [r.status_code for r in responses] == [201] * 24
        job_ids = {r.json()["id"] for r in responses}
        wait_for(
            lambda: job_ids <= {
                _task_job_id(m) for m in _celery_messages(redis_url, "cpu")
            },
            timeout=10,
            what="a rudder.train message for every job of the burst",
        )
        sent = [_task_job_id(m) for m in _celery_messages(redis_url, "cpu")]
        assert sorted(j for j in sent if j in job_ids) == sorted(job_ids)

    def test_gpu_device_goes_to_gpu_queue(self, api: ApiHarness, redis_url: str) -> None:
        _, headers = api.make_user()
        response = api.client.post("/v1/jobs", json=digits_spec(device="gpu"), headers=headers)
        assert response.status_code == 201
        assert response.json()["queue"] == "gpu"
        _wait_for_message(redis_url, "gpu", response.json()["id"])

    def test_idempotency_key_returns_the_same_job(self, api: ApiHarness) -> None:
        _, headers = api.make_user()
        key = {"Idempotency-Key": f"k-{uuid.uuid4()}"}
        first = api.client.post("/v1/jobs", json=digits_spec(), headers=headers | key)
        second = api.client.post("/v1/jobs", json=digits_spec(), headers=headers | key)
        assert first.status_code == second.status_code == 201
        assert first.json()["id"] == second.json()["id"]
        assert second.headers["idempotent-replayed"] == "true"
        listed = api.client.get("/v1/jobs", headers=headers).json()["data"]
        assert [j["id"] for j in listed] == [first.json()["id"]]

    def test_concurrent_submits_with_one_idempotency_key_make_one_job(
        self, api: ApiHarness
    ) -> None:
        _, headers = api.make_user()
        key = {"Idempotency-Key": f"race-{uuid.uuid4()}"}
        with ThreadPoolExecutor(max_workers=8) as pool:
            responses = list(pool.map(
                lambda _: api.client.post("/v1/jobs", json=digits_spec(), headers=headers | key),
                range(8),
            ))
        assert [r.status_code for r in responses] == [201] * 8
        assert len({r.json()["id"] for r in responses}) == 1
        assert sum(r.headers.get("idempotent-replayed") == "true" for r in responses) == 7
        listed = api.client.get("/v1/jobs", headers=headers).json()["data"]
        assert [j["id"] for j in listed] == [responses[0].json()["id"]]

    def test_idempotency_key_reused_with_other_body_is_a_conflict(self, api: ApiHarness) -> None:
        _, headers = api.make_user()
        key = {"Idempotency-Key": "same"}
        api.client.post("/v1/jobs", json=digits_spec(), headers=headers | key)
        other = api.client.post("/v1/jobs", json=digits_spec(epochs=3), headers=headers | key)
        assert other.status_code == 409
        assert other.json()["error"]["code"] == "idempotency_conflict"

    def test_idempotency_keys_are_per_owner(self, api: ApiHarness) -> None:
        _, alice = api.make_user()
        _, bob = api.make_user()
        key = {"Idempotency-Key": "shared-key"}
        a = api.client.post("/v1/jobs", json=digits_spec(), headers=alice | key)
        b = api.client.post("/v1/jobs", json=digits_spec(), headers=bob | key)
        assert a.status_code == b.status_code == 201
        assert a.json()["id"] != b.json()["id"]


class TestReadAndList:
    def test_get_job_with_progress_and_spec(self, api: ApiHarness) -> None:
        user_id, headers = api.make_user()
        job_id = api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"]
        with api.sessions() as session:
            repositories.update_job_progress(
                session, job_id=job_id, epoch=2, step=150, current_lr=0.0005,
                latest_metrics={"train_accuracy": 0.9},
            )
            session.commit()
        job = api.client.get(f"/v1/jobs/{job_id}", headers=headers).json()
        assert job["progress"] == {
            "epoch": 2, "step": 150, "current_lr": 0.0005, "metrics": {"train_accuracy": 0.9}
        }
        assert job["spec"]["optimizer"]["type"] == "adam"

    def test_cursor_pagination_walks_every_job_once(self, api: ApiHarness) -> None:
        _, headers = api.make_user()
        ids = set()
        for i in range(5):
            job = api.client.post("/v1/jobs", json=digits_spec(name=f"j{i}"), headers=headers)
            ids.add(job.json()["id"])
        seen: list[str] = []
        cursor = None
        for _ in range(5):
            params: dict[str, str | int] = {"limit": 2}
            if cursor:
                params["cursor"] = cursor
            page = api.client.get("/v1/jobs", params=params, headers=headers).json()
            seen += [j["id"] for j in page["data"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert len(seen) == 5 and set(seen) == ids

    def test_status_filter(self, api: ApiHarness) -> None:
        _, headers = api.make_user()
        a = api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"]
        b = api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"]
        api.client.post(f"/v1/jobs/{a}/cancel", headers=headers)
        cancelled = api.client.get("/v1/jobs?status=cancelled", headers=headers).json()["data"]
        queued = api.client.get("/v1/jobs", params={"status": "queued"}, headers=headers).json()
        assert [j["id"] for j in cancelled] == [a]
        assert [j["id"] for j in queued["data"]] == [b]

    def test_unknown_status_filter_names_the_field(self, api: ApiHarness) -> None:
        _, headers = api.make_user()
        response = api.client.get("/v1/jobs?status=sleeping", headers=headers)
        assert response.status_code == 422
        assert response.json()["error"]["message"].startswith("status:")

    def test_garbage_cursor_is_a_400(self, api: ApiHarness) -> None:
        _, headers = api.make_user()
        response = api.client.get("/v1/jobs?cursor=not-a-cursor!!", headers=headers)
        assert response.status_code == 400
        assert response.json()["error"]["details"][0]["field"] == "cursor"


class TestIsolation:
    def test_another_users_job_is_not_found(self, api: ApiHarness) -> None:
        _, alice = api.make_user()
        _, bob = api.make_user()
        job_id = api.client.post("/v1/jobs", json=digits_spec(), headers=alice).json()["id"]
        for method, path in [
            ("GET", f"/v1/jobs/{job_id}"),
            ("POST", f"/v1/jobs/{job_id}/cancel"),
            ("POST", f"/v1/jobs/{job_id}/pause"),
            ("GET", f"/v1/jobs/{job_id}/metrics"),
            ("GET", f"/v1/jobs/{job_id}/learning-rate"),
            ("GET", f"/v1/jobs/{job_id}/checkpoints"),
        ]:
            response = api.client.request(method, path, headers=bob)
            assert response.status_code == 404, (method, path, response.text)
            assert response.json()["error"]["code"] == "not_found"
        put = api.client.put(
            f"/v1/jobs/{job_id}/learning-rate", json={"learning_rate": 0.1}, headers=bob
        )
        assert put.status_code == 404
        assert api.client.get("/v1/jobs", headers=bob).json()["data"] == []
        # and nothing changed for the owner
        job = api.client.get(f"/v1/jobs/{job_id}", headers=alice).json()
        assert job["status"] == "queued"
        with api.sessions() as session:
            assert repositories.list_lr_changes(session, job_id=job_id) == []


class TestControl:
    def _submit(self, api: ApiHarness, headers: dict[str, str]) -> str:
        return str(api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"])

    def test_pause_and_resume_a_queued_job(self, api: ApiHarness, redis_url: str) -> None:
        _, headers = api.make_user()
        job_id = self._submit(api, headers)
        paused = api.client.post(f"/v1/jobs/{job_id}/pause", headers=headers)
        assert paused.status_code == 202
        assert paused.json() | {} == {
            "job_id": job_id, "action": "pause", "status": "paused", "command_id": None,
            "pending": False,
        }
        # Paused before the dispatcher sent it, or sent and then paused: either way only
        # the resume's message matters here.
        redis.Redis.from_url(redis_url).delete("cpu")
        resumed = api.client.post(f"/v1/jobs/{job_id}/resume", headers=headers)
        assert resumed.status_code == 202 and resumed.json()["status"] == "queued"
        _wait_for_message(redis_url, "cpu", job_id)
        with api.sessions() as session:
            events = repositories.list_status_events(session, job_id=job_id)
            assert [e.status for e in events] == ["queued", "paused", "queued"]

    def test_resume_of_a_job_that_is_not_paused_is_a_conflict(self, api: ApiHarness) -> None:
        _, headers = api.make_user()
        job_id = self._submit(api, headers)
        response = api.client.post(f"/v1/jobs/{job_id}/resume", headers=headers)
        assert response.status_code == 409
        assert "queued" in response.json()["error"]["message"]

    def test_running_job_gets_control_commands(self, api: ApiHarness, redis_url: str) -> None:
        from core.channel import Channel

        _, headers = api.make_user()
        job_id = self._submit(api, headers)
        with api.sessions() as session:
            repositories.transition_job(session, job_id=job_id, to_status=JobStatus.RUNNING)
            session.commit()
        channel = Channel.from_url(redis_url)
        try:
            channel.acquire_lease(job_id, owner="worker-1", ttl_ms=10_000)
            pause = api.client.post(f"/v1/jobs/{job_id}/pause", headers=headers).json()
            cancel = api.client.post(f"/v1/jobs/{job_id}/cancel", headers=headers).json()
            assert pause["pending"] and cancel["pending"]
            assert pause["status"] == cancel["status"] == "running"
            commands = channel.read_commands(job_id)
            assert [(c.type, c.command_id) for c in commands] == [
                ("pause", pause["command_id"]), ("cancel", cancel["command_id"])
            ]
        finally:
            channel.close()

    def test_cancel_of_running_job_without_a_lease_holder_is_immediate(
        self, api: ApiHarness
    ) -> None:
        _, headers = api.make_user()
        job_id = self._submit(api, headers)
        with api.sessions() as session:
            repositories.transition_job(session, job_id=job_id, to_status=JobStatus.RUNNING)
            session.commit()
        response = api.client.post(f"/v1/jobs/{job_id}/cancel", headers=headers)
        assert response.json()["status"] == "cancelled" and not response.json()["pending"]

    @pytest.mark.parametrize("action", ["pause", "resume", "cancel"])
    def test_control_of_a_finished_job_is_a_conflict(
        self, api: ApiHarness, action: str
    ) -> None:
        _, headers = api.make_user()
        job_id = self._submit(api, headers)
        with api.sessions() as session:
            repositories.transition_job(session, job_id=job_id, to_status=JobStatus.SUCCEEDED)
            session.commit()
        response = api.client.post(f"/v1/jobs/{job_id}/{action}", headers=headers)
        assert response.status_code == 409
        assert response.json()["error"]["code"] == "invalid_state"
        assert api.client.get(f"/v1/jobs/{job_id}", headers=headers).json()["status"] == (
            "succeeded"
        )
