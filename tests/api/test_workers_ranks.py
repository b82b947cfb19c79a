"""The System view names each worker's rank in a job on several workers (issue 23)."""

from __future__ import annotations

from core.channel import Channel
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness
from workers import heartbeat


def test_each_rank_of_ones_own_job_is_shown(sqlite_api: ApiHarness, redis_url: str) -> None:
    _, headers = sqlite_api.make_user()
    _, stranger = sqlite_api.make_user()
    spec = digits_spec(resources={"workers": 2})
    job_id = sqlite_api.client.post("/v1/jobs", json=spec, headers=headers).json()["id"]
    channel = Channel.from_url(redis_url)
    beats = [heartbeat.Heartbeat(channel, queues=["cpu"]) for _ in range(2)]
    try:
        for rank, beat in enumerate(beats):
            with heartbeat.working_on(job_id):
                heartbeat.training_as_rank(rank, 2)
                beat.beat()
        listed = {w["worker_id"]: w for w in sqlite_api.client.get(
            "/v1/workers", headers=headers).json()["workers"]}
        assert [(listed[b.worker_id]["rank"], listed[b.worker_id]["ranks"]) for b in beats] \
            == [(0, 2), (1, 2)]
        assert all(listed[b.worker_id]["current_job_id"] == job_id for b in beats)
        theirs = {w["worker_id"]: w for w in sqlite_api.client.get(
            "/v1/workers", headers=stranger).json()["workers"]}
        assert theirs[beats[1].worker_id]["rank"] is None  # not their job
    finally:
        for beat in beats:
            channel.remove_heartbeat(beat.worker_id)
        channel.close()
