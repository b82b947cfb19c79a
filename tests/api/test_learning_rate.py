from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import UTC, datetime
from typing import Any

import httpx

from core import repositories
from core.channel import Channel
from core.events import SetLRCommand
from core.models import JobStatus
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness, serve
from tests.services import redis_server


def _running_job(api: ApiHarness, headers: dict[str, str], **spec: Any) -> str:
    response = api.client.post("/v1/jobs", json=digits_spec(**spec), headers=headers)
    job_id = str(response.json()["id"])
    with api.sessions() as session:
        assert repositories.transition_job(session, job_id=job_id, to_status=JobStatus.RUNNING)
        session.commit()
    return job_id


def _put_concurrently(
    api: ApiHarness, headers: dict[str, str], job_id: str, *, max_changes: int
) -> list[str]:
    """Fire 3 x max_changes changes at once; check exactly max_changes got through and
    the rest were told when to retry. Returns the accepted change ids, sorted."""
    attempts = 3 * max_changes
    start = threading.Barrier(attempts)

    def put(index: int) -> httpx.Response:
        with httpx.Client(base_url=api.url, headers=headers, timeout=30) as client:
            start.wait()
            return client.put(
                f"/v1/jobs/{job_id}/learning-rate", json={"learning_rate": 0.01 * (index + 1)}
            )

    with ThreadPoolExecutor(max_workers=attempts) as pool:
        responses = list(pool.map(put, range(attempts)))
    accepted = [r for r in responses if r.status_code == 202]
    limited = [r for r in responses if r.status_code == 429]
    assert len(accepted) == max_changes
    assert len(limited) == attempts - max_changes
    for response in limited:
        assert 1 <= int(response.headers["retry-after"]) <= 30
        assert response.json()["error"]["code"] == "rate_limited"
    return sorted(r.json()["change_id"] for r in accepted)


class TestChangeLearningRate:
    def test_change_is_recorded_and_sent_to_the_worker(
        self, api: ApiHarness, redis_url: str
    ) -> None:
        user_id, headers = api.make_user()
        job_id = _running_job(api, headers)
        response = api.client.put(
            f"/v1/jobs/{job_id}/learning-rate", json={"learning_rate": 0.01}, headers=headers
        )
        assert response.status_code == 202
        accepted = response.json()
        assert accepted["status"] == "pending"
        channel = Channel.from_url(redis_url)
        try:
            [command] = channel.read_commands(job_id)
        finally:
            channel.close()
        assert command.command == SetLRCommand(
            command_id=accepted["change_id"], learning_rate=0.01, mode="scale",
            requested_by=user_id,
        )
        state = api.client.get(f"/v1/jobs/{job_id}/learning-rate", headers=headers).json()
        # not applied yet: the schedule's warmup begins at 0 (issue 26)
        assert state["learning_rate"] == 0.0
        assert state["schedule"] == {"type": "cosine", "max_update": 1000, "warmup_steps": 50}
        [change] = state["changes"]
        assert change["change_id"] == accepted["change_id"]
        assert change["requested_by"] == user_id
        assert change["status"] == "pending" and change["applied_step"] is None

    def test_applied_change_shows_step_and_time(self, api: ApiHarness) -> None:
        _, headers = api.make_user()
        job_id = _running_job(api, headers, lr_scheduler=None)
        change_id = api.client.put(
            f"/v1/jobs/{job_id}/learning-rate",
            json={"learning_rate": 0.05, "mode": "override"},
            headers=headers,
        ).json()["change_id"]
        applied_at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
        with api.sessions() as session:  # what the worker does once it applied the change
            assert repositories.mark_lr_change_applied(
                session, change_id=change_id, applied_step=321, applied_lr=0.05,
                applied_at=applied_at,
            )
            repositories.update_job_progress(
                session, job_id=job_id, epoch=1, step=321, current_lr=0.05
            )
            session.commit()
        state = api.client.get(f"/v1/jobs/{job_id}/learning-rate", headers=headers).json()
        assert state["learning_rate"] == 0.05
        assert state["schedule"] is None
        [change] = state["changes"]
        assert change["status"] == "applied"
        assert change["mode"] == "override"
        assert change["applied_step"] == 321
        assert datetime.fromisoformat(change["applied_at"]) == applied_at

    def test_rejected_change_shows_its_status_and_reason(self, api: ApiHarness) -> None:
        _, headers = api.make_user()
        job_id = _running_job(api, headers)
        change_id = api.client.put(
            f"/v1/jobs/{job_id}/learning-rate", json={"learning_rate": 0.05}, headers=headers
        ).json()["change_id"]
        reason = "cannot scale a schedule whose current learning rate is 0.0"
        with api.sessions() as session:  # what the worker records when it refuses
            assert repositories.mark_lr_change_rejected(session, change_id=change_id,
                                                        reason=reason)
            session.commit()
        [change] = api.client.get(f"/v1/jobs/{job_id}/learning-rate",
                                  headers=headers).json()["changes"]
        assert (change["change_id"], change["status"], change["reason"]) == (
            change_id, "rejected", reason)
        assert change["applied_step"] is None and change["applied_at"] is None

    def test_rate_limit_returns_429_with_retry_after(self, make_api: Any) -> None:
        api = make_api(lr={"max_changes": 2, "window_seconds": 30})
        _, headers = api.make_user()
        job_id = _running_job(api, headers)
        url = f"/v1/jobs/{job_id}/learning-rate"
        for value in (0.01, 0.02):
            response = api.client.put(url, json={"learning_rate": value}, headers=headers)
            assert response.status_code == 202
        limited = api.client.put(url, json={"learning_rate": 0.03}, headers=headers)
        assert limited.status_code == 429
        assert 1 <= int(limited.headers["retry-after"]) <= 30
        assert limited.json()["error"]["code"] == "rate_limited"
        state = api.client.get(url, headers=headers).json()
        assert [c["requested_lr"] for c in state["changes"]] == [0.01, 0.02]

    def test_concurrent_changes_cannot_overrun_the_rate_limit(
        self, make_api: Any, redis_url: str
    ) -> None:
        api = make_api(lr={"max_changes": 4, "window_seconds": 30})
        _, headers = api.make_user()
        job_id = _running_job(api, headers)
        accepted_ids = _put_concurrently(api, headers, job_id, max_changes=4)
        # only the admitted changes were stored, and each was sent to the worker
        with api.sessions() as session:
            stored = repositories.list_lr_changes(session, job_id=job_id)
        assert sorted(c.id for c in stored) == accepted_ids
        channel = Channel.from_url(redis_url)
        try:
            sent = channel.read_commands(job_id)
        finally:
            channel.close()
        assert sorted(c.command_id for c in sent) == accepted_ids

    def test_without_redis_the_limit_still_holds_in_one_process(self, make_api: Any) -> None:
        api = make_api(redis_url=None, lr={"max_changes": 3, "window_seconds": 30})
        _, headers = api.make_user()
        job_id = _running_job(api, headers)
        accepted_ids = _put_concurrently(api, headers, job_id, max_changes=3)
        with api.sessions() as session:
            stored = repositories.list_lr_changes(session, job_id=job_id)
        assert sorted(c.id for c in stored) == accepted_ids

    def test_unreachable_redis_refuses_the_change_and_stores_nothing(
        self, make_settings: Any
    ) -> None:
        with ExitStack() as redis_stack:
            private_redis = redis_stack.enter_context(redis_server())
            with serve(make_settings(redis_url=private_redis)) as api:
                _, headers = api.make_user()
                job_id = _running_job(api, headers)
                redis_stack.close()  # Redis goes away while the api runs
                url = f"/v1/jobs/{job_id}/learning-rate"
                response = api.client.put(url, json={"learning_rate": 0.1}, headers=headers)
                assert response.status_code == 503
                assert response.json()["error"]["code"] == "unavailable"
                assert api.client.get(url, headers=headers).json()["changes"] == []

    def test_rate_limit_is_per_job(self, make_api: Any) -> None:
        api = make_api(lr={"max_changes": 1, "window_seconds": 30})
        _, headers = api.make_user()
        first, second = _running_job(api, headers), _running_job(api, headers)
        for job_id in (first, second):
            response = api.client.put(
                f"/v1/jobs/{job_id}/learning-rate", json={"learning_rate": 0.1}, headers=headers
            )
            assert response.status_code == 202

    def test_finished_job_refuses_changes(self, api: ApiHarness) -> None:
        _, headers = api.make_user()
        job_id = _running_job(api, headers)
        with api.sessions() as session:
            repositories.transition_job(session, job_id=job_id, to_status=JobStatus.FAILED)
            session.commit()
        response = api.client.put(
            f"/v1/jobs/{job_id}/learning-rate", json={"learning_rate": 0.1}, headers=headers
        )
        assert response.status_code == 409

    def test_queued_job_accepts_a_change_for_when_it_starts(self, api: ApiHarness) -> None:
        _, headers = api.make_user()
        job_id = api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"]
        response = api.client.put(
            f"/v1/jobs/{job_id}/learning-rate", json={"learning_rate": 0.2}, headers=headers
        )
        assert response.status_code == 202
        body = api.client.get(f"/v1/jobs/{job_id}/learning-rate", headers=headers).json()
        assert json.dumps(body["changes"][0]["requested_lr"]) == "0.2"
