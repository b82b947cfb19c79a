"""Server-Sent Events over a real uvicorn: live tail, resume, tickets, lifetime."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from core import repositories
from core.channel import Channel
from core.config import Settings
from core.models import JobStatus
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness, serve


@pytest.fixture
def channel(redis_url: str) -> Iterator[Channel]:
    chan = Channel.from_url(redis_url)
    yield chan
    chan.close()


def parse_sse(lines: Iterator[str], count: int) -> list[dict[str, Any]]:
    """Read ``count`` events (comments and retry lines skipped)."""
    events: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in lines:
        if line == "":
            if "event" in current:
                events.append(current)
                if len(events) == count:
                    return events
            current = {}
        elif line.startswith(":") or line.startswith("retry:"):
            continue
        else:
            key, _, value = line.partition(": ")
            current[key] = json.loads(value) if key == "data" else value
    return events


def _submit(api: ApiHarness, headers: dict[str, str]) -> str:
    return str(api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"])


def test_live_events_arrive_with_stream_ids(api: ApiHarness, channel: Channel) -> None:
    _, headers = api.make_user()
    job_id = _submit(api, headers)
    first = channel.publish_metric(job_id, step=1, epoch=0, values={"train_loss": 2.3})

    def publish_later() -> None:
        time.sleep(0.3)
        channel.publish_lr_applied(
            job_id, change_id="c1", learning_rate=0.01, mode="scale", applied_step=2
        )
        channel.publish_status(job_id, "succeeded")

    publisher = threading.Thread(target=publish_later)
    publisher.start()
    with api.client.stream("GET", f"/v1/jobs/{job_id}/events", headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = parse_sse(response.iter_lines(), 3)
    # the SSE client can see the last event before the publisher has read Redis's reply;
    # let it finish before the channel fixture closes the connection under it
    publisher.join(timeout=10)
    assert [e["event"] for e in events] == ["metric", "lr", "status"]
    assert events[0]["id"] == first
    assert events[0]["data"]["values"] == {"train_loss": 2.3}
    assert events[1]["data"]["change_id"] == "c1"
    assert events[1]["data"]["applied_step"] == 2


def test_last_event_id_resumes_after_that_event(api: ApiHarness, channel: Channel) -> None:
    _, headers = api.make_user()
    job_id = _submit(api, headers)
    ids = [channel.publish_metric(job_id, step=s, epoch=0, values={"x": s}) for s in (1, 2, 3)]
    channel.publish_status(job_id, "cancelled")
    with api.client.stream(
        "GET", f"/v1/jobs/{job_id}/events", headers=headers | {"Last-Event-ID": ids[0]}
    ) as response:
        events = parse_sse(response.iter_lines(), 3)
    assert [e["id"] for e in events[:2]] == ids[1:]
    assert events[2]["event"] == "status"


def test_stream_of_a_finished_job_ends(api: ApiHarness, channel: Channel) -> None:
    _, headers = api.make_user()
    job_id = _submit(api, headers)
    channel.publish_metric(job_id, step=1, epoch=0, values={"x": 1.0})
    with api.sessions() as session:
        repositories.transition_job(session, job_id=job_id, to_status=JobStatus.CANCELLED)
        session.commit()
    response = api.client.get(f"/v1/jobs/{job_id}/events", headers=headers, timeout=10)
    assert response.status_code == 200
    assert response.text.count("event: metric") == 1


def test_ticket_is_single_use_and_bound_to_the_job(
    api: ApiHarness, channel: Channel
) -> None:
    _, headers = api.make_user()
    job_id, other = _submit(api, headers), _submit(api, headers)
    channel.publish_status(job_id, "succeeded")
    ticket = api.client.post(f"/v1/jobs/{job_id}/events/ticket", headers=headers).json()
    assert ticket["url"] == f"/v1/jobs/{job_id}/events?ticket={ticket['ticket']}"
    wrong_job = api.client.get(f"/v1/jobs/{other}/events", params={"ticket": ticket["ticket"]})
    assert wrong_job.status_code == 401
    ticket = api.client.post(f"/v1/jobs/{job_id}/events/ticket", headers=headers).json()
    with api.client.stream("GET", ticket["url"]) as response:
        assert response.status_code == 200
        [event] = parse_sse(response.iter_lines(), 1)
    assert event["data"] == {"status": "succeeded"}
    again = api.client.get(ticket["url"])
    assert again.status_code == 401
    assert "ticket" in again.json()["error"]["message"]


def test_stream_needs_auth_and_ownership(api: ApiHarness) -> None:
    _, alice = api.make_user()
    _, bob = api.make_user()
    job_id = _submit(api, alice)
    assert api.client.get(f"/v1/jobs/{job_id}/events").status_code == 401
    assert api.client.get(f"/v1/jobs/{job_id}/events", headers=bob).status_code == 404
    bad = api.client.get(f"/v1/jobs/{job_id}/events", headers=alice | {"Last-Event-ID": "x"})
    assert bad.status_code == 400
    assert bad.json()["error"]["details"][0]["field"] == "Last-Event-ID"


def test_connection_closes_after_its_maximum_lifetime(
    make_settings: Any, channel: Channel
) -> None:
    settings: Settings = make_settings(stream={"max_connection_seconds": 1.0, "block_ms": 200})
    with serve(settings) as api:
        _, headers = api.make_user()
        job_id = _submit(api, headers)
        started = time.monotonic()
        response = api.client.get(f"/v1/jobs/{job_id}/events", headers=headers, timeout=10)
        elapsed = time.monotonic() - started
    assert response.status_code == 200
    assert ": keepalive" in response.text
    assert 0.9 <= elapsed < 5


def test_server_notices_a_client_that_went_away(api: ApiHarness) -> None:
    from prometheus_client import REGISTRY

    def open_streams() -> float:
        return float(REGISTRY.get_sample_value("rudder_sse_connections") or 0.0)

    _, headers = api.make_user()
    job_id = _submit(api, headers)
    with httpx.Client(base_url=api.url, timeout=10) as client:
        with client.stream("GET", f"/v1/jobs/{job_id}/events", headers=headers) as response:
            lines = response.iter_lines()  # keep a reference: dropping it closes the stream
            assert next(lines) == "retry: 1000"
            while_open = open_streams()
            assert while_open >= 1
    # The server polls for disconnects between blocking reads, so within ~1 s it ends
    # the stream and stops holding a Redis connection for a client that left.
    deadline = time.monotonic() + 5
    while open_streams() > while_open - 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert open_streams() == while_open - 1



def test_a_stream_id_redis_would_refuse_is_a_400_before_the_stream(api: ApiHarness) -> None:
    """Issue 14: 20-digit parts pass a digits-only check but overflow Redis's uint64."""
    _, headers = api.make_user()
    job_id = _submit(api, headers)
    huge = "99999999999999999999-99999999999999999999"
    for kwargs in ({"headers": headers | {"Last-Event-ID": huge}},
                   {"headers": headers, "params": {"after": huge}}):
        response = api.client.get(f"/v1/jobs/{job_id}/events", **kwargs)
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "validation_error"


def test_the_largest_stream_id_redis_holds_is_accepted(api: ApiHarness) -> None:
    """The uint64 bound is exact: the maximum id streams (nothing after it), one more is
    a 400."""
    _, headers = api.make_user()
    job_id = _submit(api, headers)
    api.client.post(f"/v1/jobs/{job_id}/cancel", headers=headers)  # finished: the stream ends
    largest = f"{2**64 - 1}-{2**64 - 1}"
    ok = api.client.get(f"/v1/jobs/{job_id}/events", params={"after": largest}, headers=headers)
    assert ok.status_code == 200, ok.text
    over = api.client.get(f"/v1/jobs/{job_id}/events", params={"after": f"{2**64}-0"},
                          headers=headers)
    assert over.status_code == 400
    assert over.json()["error"]["details"][0]["field"] == "after"
