"""Issue 14 items 5-6: a dependency that fails is a 503 with Retry-After and the JSON error
shape, never a 500 (real processes: a private redis-server killed under the api, a real
SQLite write lock held from another connection, a database that is not there)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from core import repositories
from core.config import Settings
from core.models import JobStatus
from tests.api.specs import digits_spec
from tests.conftest import TEST_SECRET, ApiHarness, serve
from tests.restartable_redis import RedisProcess
from tests.services import free_port, wait_until


def assert_unavailable(response: httpx.Response, *, mentions: str) -> None:
    assert response.status_code == 503, (response.request.url, response.text)
    assert int(response.headers["Retry-After"]) >= 1
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == "unavailable"
    assert mentions in body["error"]["message"]


def _running_job(api: ApiHarness, headers: dict[str, str]) -> str:
    job_id = str(api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"])
    with api.sessions() as session:
        assert repositories.transition_job(session, job_id=job_id, to_status=JobStatus.RUNNING,
                                           from_statuses=[JobStatus.QUEUED])
        session.commit()
    return job_id


def test_every_route_that_needs_redis_answers_503_while_it_is_down(
    make_settings: Callable[..., Settings], private_redis: RedisProcess
) -> None:
    with serve(make_settings(redis_url=private_redis.url)) as api:
        _, headers = api.make_user()
        job_id = _running_job(api, headers)
        private_redis.kill()
        calls: list[tuple[str, str, dict[str, Any]]] = [
            ("POST", f"/v1/jobs/{job_id}/events/ticket", {}),
            ("POST", f"/v1/jobs/{job_id}/pause", {}),
            ("POST", f"/v1/jobs/{job_id}/cancel", {}),
            ("PUT", f"/v1/jobs/{job_id}/learning-rate", {"json": {"learning_rate": 0.01}}),
            ("GET", f"/v1/jobs/{job_id}/events", {}),
            ("GET", "/v1/workers", {}),
        ]
        for method, path, kwargs in calls:
            response = api.client.request(method, path, headers=headers, timeout=15, **kwargs)
            assert_unavailable(response, mentions="Redis")
        # Nothing was half-done: the job still runs, as far as the database knows.
        job = api.client.get(f"/v1/jobs/{job_id}", headers=headers).json()
        assert job["status"] == "running"


def test_a_redis_that_hangs_is_a_503_after_the_timeout_not_a_request_held_forever(
    make_settings: Callable[..., Settings], private_redis: RedisProcess
) -> None:
    with serve(make_settings(redis_url=private_redis.url, redis_timeout_seconds=1.0)) as api:
        _, headers = api.make_user()
        job_id = _running_job(api, headers)
        private_redis.freeze()
        try:
            for method, path in [("POST", f"/v1/jobs/{job_id}/events/ticket"),
                                 ("POST", f"/v1/jobs/{job_id}/pause"),
                                 ("GET", f"/v1/jobs/{job_id}/events")]:
                started = time.monotonic()
                response = api.client.request(method, path, headers=headers, timeout=30)
                assert_unavailable(response, mentions="Redis")
                assert time.monotonic() - started < 10
        finally:
            private_redis.thaw()
        assert api.client.post(f"/v1/jobs/{job_id}/events/ticket",
                               headers=headers).status_code == 201


def test_an_event_stream_ends_cleanly_when_redis_dies_under_it(
    make_settings: Callable[..., Settings], private_redis: RedisProcess
) -> None:
    settings = make_settings(redis_url=private_redis.url, stream={"block_ms": 200})
    with serve(settings) as api:
        _, headers = api.make_user()
        job_id = _running_job(api, headers)
        with api.client.stream("GET", f"/v1/jobs/{job_id}/events", headers=headers,
                               timeout=15) as response:
            assert response.status_code == 200
            lines = response.iter_lines()
            assert next(lines) == "retry: 1000"
            private_redis.kill()
            started = time.monotonic()
            rest = list(lines)  # a clean end of the chunked body, not a dropped connection
        assert time.monotonic() - started < 10
        assert all(line in ("", ": keepalive") for line in rest), rest
        again = api.client.get(f"/v1/jobs/{job_id}/events", headers=headers, timeout=15)
        assert_unavailable(again, mentions="Redis")


def _unreachable_database(kind: str, tmp_path: Path) -> str:
    if kind == "sqlite":
        (tmp_path / "a-directory.db").mkdir()  # SQLite cannot open a directory
        return f"sqlite:///{tmp_path / 'a-directory.db'}"
    return f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/rudder"


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_database_that_does_not_answer_is_a_503(
    kind: str, redis_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        environment="test", secret_key=TEST_SECRET, redis_url=redis_url,
        database_url=_unreachable_database(kind, tmp_path),
        storage_url=f"file://{tmp_path / 'objects'}",
    )
    with serve(settings) as api:
        headers = {"Authorization": "Bearer rdr_some-token-the-database-would-know"}
        for method, path in [("GET", "/v1/jobs"), ("POST", "/v1/jobs")]:
            response = api.client.request(method, path, headers=headers, json=digits_spec())
            assert_unavailable(response, mentions="database")


def _sqlite_path(url: str) -> str:
    return url.removeprefix("sqlite:///")


def test_a_held_sqlite_lock_is_a_503_after_the_busy_timeout_and_reads_go_on(
    sqlite_url: str, redis_url: str, tmp_path: Path
) -> None:
    """Issue 14 item 6: a submit waited past the busy timeout got a 500, and reads queued
    behind it because the api had one SQLite connection."""
    busy_timeout = 3.0
    settings = Settings(
        environment="test", secret_key=TEST_SECRET, redis_url=redis_url,
        database_url=sqlite_url, storage_url=f"file://{tmp_path / 'objects'}",
        database_lock_timeout_seconds=busy_timeout,
    )
    with serve(settings) as api:
        _, headers = api.make_user()
        existing = api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"]
        holder = sqlite3.connect(_sqlite_path(sqlite_url), isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # the write lock, as another process would hold it
        submitted: dict[str, Any] = {}

        def submit() -> None:
            started = time.monotonic()
            submitted["response"] = api.client.post("/v1/jobs", json=digits_spec(),
                                                    headers=headers, timeout=30)
            submitted["seconds"] = time.monotonic() - started

        try:
            writer = threading.Thread(target=submit)
            writer.start()
            time.sleep(0.5)  # the submit is now waiting for the lock
            read_seconds = []
            for path in (f"/v1/jobs/{existing}", "/v1/jobs", f"/v1/jobs/{existing}/metrics"):
                started = time.monotonic()
                assert api.client.get(path, headers=headers).status_code == 200
                read_seconds.append(time.monotonic() - started)
            assert writer.is_alive(), "the submit should still be waiting for the lock"
            writer.join(timeout=30)
        finally:
            holder.rollback()
            holder.close()
        # Reads did not queue behind the waiting writer ...
        assert max(read_seconds) < busy_timeout / 3, read_seconds
        # ... and the writer got a retryable answer once the busy timeout ran out.
        assert_unavailable(submitted["response"], mentions="database is busy")
        assert busy_timeout - 0.5 <= submitted["seconds"] < busy_timeout + 5
        # With the lock released the same submit goes through.
        again = api.client.post("/v1/jobs", json=digits_spec(), headers=headers)
        assert again.status_code == 201


def test_a_postgresql_row_lock_held_past_the_lock_timeout_is_a_503_and_reads_go_on(
    postgres_url: str, redis_url: str, tmp_path: Path
) -> None:
    """The PostgreSQL side of item 6: a write that waits for a row lock another connection
    holds gives up after ``database_lock_timeout_seconds`` with a 503 instead of holding
    the request (and a pooled connection) for as long as the lock lasts."""
    from sqlalchemy import create_engine, text

    lock_timeout = 1.5
    settings = Settings(
        environment="test", secret_key=TEST_SECRET, redis_url=redis_url,
        database_url=postgres_url, storage_url=f"file://{tmp_path / 'objects'}",
        database_lock_timeout_seconds=lock_timeout,
    )
    with serve(settings) as api:
        _, headers = api.make_user()
        job_id = api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"]
        holder = create_engine(postgres_url).connect()
        try:
            holder.execute(text("SELECT id FROM jobs WHERE id = :id FOR UPDATE"),
                           {"id": job_id})  # the row lock, held until the rollback
            started = time.monotonic()
            paused = api.client.post(f"/v1/jobs/{job_id}/pause", headers=headers)
            waited = time.monotonic() - started
            read = api.client.get(f"/v1/jobs/{job_id}", headers=headers)
        finally:
            holder.rollback()
            holder.close()
            holder.engine.dispose()
        assert_unavailable(paused, mentions="database is busy")
        assert lock_timeout - 0.3 <= waited < lock_timeout + 5
        assert read.status_code == 200 and read.json()["status"] == "queued"
        again = api.client.post(f"/v1/jobs/{job_id}/pause", headers=headers)
        assert again.status_code == 202 and again.json()["status"] == "paused"


def test_a_client_following_events_rides_out_a_redis_restart(
    make_settings: Callable[..., Settings], private_redis: RedisProcess
) -> None:
    """The stream ends when Redis dies, reconnecting gets 503 + Retry-After while it is
    down, and rudder.Client waits that out and resumes after its Last-Event-ID."""
    from core.channel import Channel
    from rudder.client import Client, ServerEvent

    settings = make_settings(redis_url=private_redis.url, stream={"block_ms": 200})
    with serve(settings) as api:
        _, headers = api.make_user()
        job_id = _running_job(api, headers)

        def publish(use: Callable[[Channel], Any]) -> None:
            channel = Channel.from_url(private_redis.url)
            try:
                use(channel)
            finally:
                channel.close()

        publish(lambda ch: ch.publish_metric(job_id, step=1, epoch=0, values={"loss": 1.0}))
        received: list[ServerEvent] = []

        def follow() -> None:
            token = headers["Authorization"].removeprefix("Bearer ")
            with Client(api.url, token=token) as client:
                received.extend(client.events(job_id, unavailable_patience=30))

        follower = threading.Thread(target=follow)
        follower.start()
        wait_until(lambda: len(received) == 1, 10, what="the first event")
        private_redis.kill()
        down = api.client.get(f"/v1/jobs/{job_id}/events", headers=headers)
        assert_unavailable(down, mentions="Redis")
        time.sleep(2)  # the follower meets the 503 at least once
        private_redis.restart()
        publish(lambda ch: ch.publish_status(job_id, "succeeded"))
        follower.join(timeout=30)
        assert not follower.is_alive()
    assert [e.type for e in received] == ["metric", "status"]
    assert received[1].data["status"] == "succeeded"
