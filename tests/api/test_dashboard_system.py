"""The System view: worker heartbeats through the channel, GET /v1/workers, the page."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core import repositories
from core.channel import Channel
from core.events import GpuUsage, WorkerHeartbeat
from core.queue import enqueue_training
from tests.api.browser import requires_chromium
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness
from workers.heartbeat import Heartbeat, training_as_rank, working_on


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
    spec = digits_spec(resources={"workers": 2})
    job_id = sqlite_api.client.post("/v1/jobs", json=spec, headers=headers).json()["id"]
    channel = Channel.from_url(redis_url)
    beat = Heartbeat(channel, queues=["cpu"])
    gpu_worker = f"gpu-box:1:{uuid.uuid4().hex[:6]}"
    channel.publish_heartbeat(WorkerHeartbeat(
        worker_id=gpu_worker, hostname="gpu-box", queues=["gpu"], current_job_id=None,
        cpu_percent=5.0, memory_used_bytes=3 * 2**30, memory_total_bytes=8 * 2**30,
        gpus=[GpuUsage(name="NVIDIA H100 80GB HBM3", utilization_percent=37.0,
                       memory_used_bytes=2 * 2**30, memory_total_bytes=80 * 2**30)],
        time=time.time()), ttl_s=20)
    try:
        with working_on(job_id):
            training_as_rank(1, 2)  # the second rank of a job on two workers
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
        assert "rank 1 of 2" in row.text
        gpu_row = browser.find_element(
            By.CSS_SELECTOR, f'#workers tr[data-worker-id="{gpu_worker}"]')
        assert "NVIDIA H100 80GB HBM3 37% 2.0 / 80.0 GiB" in gpu_row.text
        assert "gpu" in browser.find_element(By.ID, "queues").text
        browser.save_screenshot(str(tmp_path / "system.png"))
    finally:
        channel.remove_heartbeat(beat.worker_id)
        channel.remove_heartbeat(gpu_worker)
        channel.close()
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []


def _beat(channel: Channel, worker_id: str, at: float, job_id: str | None, cpu: float) -> None:
    channel.publish_heartbeat(WorkerHeartbeat(
        worker_id=worker_id, hostname="box", queues=["cpu"], current_job_id=job_id,
        cpu_percent=cpu, memory_used_bytes=3 * 2**30, memory_total_bytes=8 * 2**30, time=at,
    ), ttl_s=20)


def _history_with_pace(api: ApiHarness, channel: Channel, headers: dict[str, str]) -> list[str]:
    """Two workers over the last ten minutes; one trains a job at 2 steps/s."""
    job_id = api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"]
    now = time.time()
    with api.sessions() as session:
        repositories.add_metric_points(session, job_id=job_id, points=[
            repositories.MetricPointIn(step=step, epoch=0, name="train_loss", value=1.0,
                                       time=datetime.fromtimestamp(now - 600 + step / 2, UTC))
            for step in range(1, 1201, 10)
        ])
        session.commit()
    busy, idle = f"busy-{uuid.uuid4().hex[:6]}", f"idle-{uuid.uuid4().hex[:6]}"
    for minutes_ago in (9, 6, 3):
        at = now - minutes_ago * 60
        _beat(channel, busy, at, job_id, cpu=80.0 + minutes_ago)
        _beat(channel, idle, at, None, cpu=5.0)
    return [busy, idle]


def test_history_keeps_each_workers_cpu_memory_and_pace(
    sqlite_api: ApiHarness, redis_url: str
) -> None:
    _, headers = sqlite_api.make_user()
    channel = Channel.from_url(redis_url)
    try:
        busy, idle = _history_with_pace(sqlite_api, channel, headers)
        body = sqlite_api.client.get("/v1/workers/history?minutes=60", headers=headers).json()
        workers = {w["worker_id"]: w for w in body["workers"]}
        samples = workers[busy]["samples"]
        assert [s["cpu_percent"] for s in samples] == [89.0, 86.0, 83.0]
        assert all(s["memory_used_bytes"] == 3 * 2**30 and s["busy"] for s in samples)
        assert samples[0]["steps_per_second"] is None  # no earlier beat to measure from
        assert [round(s["steps_per_second"], 1) for s in samples[1:]] == [2.0, 2.0]
        assert [s["steps_per_second"] for s in workers[idle]["samples"]] == [None] * 3
        recent = sqlite_api.client.get("/v1/workers/history?minutes=5", headers=headers).json()
        assert len({w["worker_id"]: w for w in recent["workers"]}[busy]["samples"]) == 1
        assert sqlite_api.client.get("/v1/workers/history?minutes=61",
                                     headers=headers).status_code == 422
    finally:
        channel.close()
    assert sqlite_api.client.get("/v1/workers/history").status_code == 401


@requires_chromium
def test_system_view_draws_the_last_hour_per_worker(
    sqlite_api: ApiHarness, browser: Any, redis_url: str, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    _, headers = sqlite_api.make_user()
    channel = Channel.from_url(redis_url)
    try:
        busy, idle = _history_with_pace(sqlite_api, channel, headers)
        browser.set_window_size(1300, 1400)
        browser.get(sqlite_api.url + "/")
        browser.find_element(By.ID, "token-input").send_keys(headers["Authorization"].split()[1])
        browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
        wait = WebDriverWait(browser, 20)
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, '#tabs button[data-view="system"]')
                   .is_displayed())
        browser.find_element(By.CSS_SELECTOR, '#tabs button[data-view="system"]').click()
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#worker-history .panel")) == 3)
        titles = [p.text.split("\n")[0] for p in
                  browser.find_elements(By.CSS_SELECTOR, "#worker-history .panel .panel-title")]
        assert titles == ["CPU (% of the machine)", "memory used (GiB)", "training pace (steps/s)"]
        pace = browser.execute_script(
            "const p = systemView.panels.get('pace').plot;"
            "const i = p.series.findIndex(s => s.label === arguments[0]);"
            "return p.data[i].filter(v => v !== null)", busy)
        assert [round(v, 1) for v in pace] == [2.0, 2.0]
        legend = browser.find_element(By.CSS_SELECTOR, '#worker-history .panel[data-family="cpu"]'
                                      ' .u-legend').text
        assert busy in legend and idle in legend
        assert browser.execute_script(
            "return systemView.panels.get('cpu').plot.scales.x.time") is True
        browser.save_screenshot(str(tmp_path / "system-history.png"))
    finally:
        channel.close()
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
