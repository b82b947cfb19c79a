from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from core import repositories
from core.channel import Channel
from core.models import JobStatus
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness


def _running_job(api: ApiHarness, headers: dict[str, str], **spec: Any) -> str:
    response = api.client.post("/v1/jobs", json=digits_spec(**spec), headers=headers)
    job_id = str(response.json()["id"])
    with api.sessions() as session:
        assert repositories.transition_job(session, job_id=job_id, to_status=JobStatus.RUNNING)
        session.commit()
    return job_id


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
        assert command.type == "set_lr"
        assert command.command_id == accepted["change_id"]
        assert command.data == {
            "change_id": accepted["change_id"], "learning_rate": 0.01, "mode": "scale"
        }
        state = api.client.get(f"/v1/jobs/{job_id}/learning-rate", headers=headers).json()
        assert state["learning_rate"] == 0.001  # not applied yet
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
