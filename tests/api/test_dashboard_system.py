"""The System view: worker heartbeats through the channel, GET /v1/workers, the page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.channel import Channel
from core.queue import enqueue_training
from tests.api.browser import requires_chromium
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness
from workers.heartbeat import Heartbeat, working_on


def _workers(api: ApiHarness, headers: dict[str, str]) -> dict[str, Any]:
    response = api.client.get("/v1/workers", headers=headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_heartbeats_list_workers_with_their_job_and_machine(
    sqlite_api: ApiHarness, redis_url: str
) -> None:
    _, headers = sqlite_api.make_user()
    _, stranger = sqlite_api.make_user()
    job_id = sqlite_api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"]
    channel = Channel.from_url(redis_url)
    busy = Heartbeat(channel, queues=["gpu", "cpu"])
    idle = Heartbeat(channel, queues=["cpu"])
    try:
        with working_on(job_id):
            busy.beat()
        idle.beat()
        listed = {w["worker_id"]: w for w in _workers(sqlite_api, headers)["workers"]}
        mine = listed[busy.worker_id]
        assert mine["queues"] == ["cpu", "gpu"] and mine["busy"] is True
        assert mine["current_job_id"] == job_id
        assert 0 < mine["memory_used_bytes"] < mine["memory_total_bytes"]
        assert mine["seconds_since_seen"] < 5
        assert listed[idle.worker_id]["busy"] is False
        assert listed[idle.worker_id]["current_job_id"] is None
        # someone else sees that the worker is busy, not which job it runs
        theirs = {w["worker_id"]: w for w in _workers(sqlite_api, stranger)["workers"]}
        assert theirs[busy.worker_id]["busy"] is True
        assert theirs[busy.worker_id]["current_job_id"] is None

        busy.beat()  # the second beat knows the CPU use since the first
        listed = {w["worker_id"]: w for w in _workers(sqlite_api, headers)["workers"]}
        cpu = listed[busy.worker_id]["cpu_percent"]
        assert cpu is None or 0 <= cpu <= 100

        idle.stop()  # a worker that shuts down leaves the list at once
        listed = {w["worker_id"] for w in _workers(sqlite_api, headers)["workers"]}
        assert idle.worker_id not in listed and busy.worker_id in listed
    finally:
        channel.remove_heartbeat(busy.worker_id)
        channel.close()
    assert sqlite_api.client.get("/v1/workers").status_code == 401


def test_queue_lengths_count_waiting_training_tasks(
    sqlite_api: ApiHarness, redis_url: str
) -> None:
    _, headers = sqlite_api.make_user()
    before = {q["name"]: q["waiting"] for q in _workers(sqlite_api, headers)["queues"]}
    assert set(before) == {"cpu", "gpu"}
    enqueue_training("00000000-0000-4000-8000-000000000000", queue="gpu", broker_url=redis_url)
    channel = Channel.from_url(redis_url)
    try:
        after = {q["name"]: q["waiting"] for q in _workers(sqlite_api, headers)["queues"]}
        assert after["gpu"] == before["gpu"] + 1
    finally:  # take the message back: no worker should ever see that job id
        channel.client.lpop("gpu")
        channel.close()


@requires_chromium
def test_system_view_shows_workers(
    sqlite_api: ApiHarness, browser: Any, redis_url: str, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    _, headers = sqlite_api.make_user()
    job_id = sqlite_api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"]
    channel = Channel.from_url(redis_url)
    beat = Heartbeat(channel, queues=["cpu"])
    try:
        with working_on(job_id):
            beat.beat()
        browser.get(sqlite_api.url + "/")
        browser.find_element(By.ID, "token-input").send_keys(headers["Authorization"].split()[1])
        browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
        wait = WebDriverWait(browser, 20)
        wait.until(ec.element_to_be_clickable(
            (By.CSS_SELECTOR, '#tabs button[data-view="system"]'))).click()
        row = wait.until(ec.presence_of_element_located(
            (By.CSS_SELECTOR, f'#workers tr[data-worker-id="{beat.worker_id}"]')))
        assert job_id[:8] in row.text and "cpu" in row.text and "GiB" in row.text
        assert "gpu" in browser.find_element(By.ID, "queues").text
        browser.save_screenshot(str(tmp_path / "system.png"))
    finally:
        channel.remove_heartbeat(beat.worker_id)
        channel.close()
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
