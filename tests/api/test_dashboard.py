"""The dashboard in a real headless Chromium against a real api and Redis."""

from __future__ import annotations

from typing import Any

from core import repositories
from core.channel import Channel
from core.models import JobStatus
from tests.api.browser import requires_chromium
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness

pytestmark = requires_chromium


def test_job_and_live_metrics_appear(sqlite_api: ApiHarness, browser: Any, redis_url: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    _, headers = sqlite_api.make_user()
    job_id = sqlite_api.client.post("/v1/jobs", json=digits_spec(name="browser-job"),
                                    headers=headers).json()["id"]
    token = headers["Authorization"].split()[1]
    wait = WebDriverWait(browser, 20)

    browser.get(sqlite_api.url + "/")
    browser.find_element(By.ID, "token-input").send_keys(token)
    browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
    row = wait.until(ec.element_to_be_clickable(
        (By.CSS_SELECTOR, f'#jobs tr[data-job-id="{job_id}"]')
    ))
    assert "browser-job" in row.text and "queued" in row.text
    assert browser.execute_script("return sessionStorage.getItem('rudder.token')") == token
    row.click()
    wait.until(ec.text_to_be_present_in_element((By.ID, "stream-state"), "live"))

    channel = Channel.from_url(redis_url)
    try:
        with sqlite_api.sessions() as session:  # what a worker does when it starts the job
            repositories.transition_job(session, job_id=job_id, to_status=JobStatus.RUNNING)
            session.commit()
        channel.publish_status(job_id, "running")
        for step in (10, 20, 30):
            channel.publish_metric(
                job_id, step=step, epoch=0,
                values={"train_loss": 2.0 / step, "lr": 0.001},
            )
        wait.until(ec.text_to_be_present_in_element(
            (By.CSS_SELECTOR, '#latest tr[data-metric="train_loss"]'), "0.06667"
        ))
        wait.until(lambda d: d.find_element(By.ID, "chart").get_attribute("data-points") == "6")
        assert browser.find_element(By.ID, "job-status").text == "running"
        assert browser.find_element(By.ID, "job-step").text == "30"
        assert "train_loss" in browser.find_element(By.ID, "legend").text

        # change the learning rate from the page; the api records it as pending
        browser.find_element(By.ID, "lr-input").send_keys("0.01")
        browser.find_element(By.CSS_SELECTOR, "#lr-form button").click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "lr-message"), "pending"))
        [command] = channel.read_commands(job_id)
        assert command.type == "set_lr" and command.data["learning_rate"] == 0.01
        channel.publish_lr_applied(
            job_id, change_id=command.command_id, learning_rate=0.01, mode="scale",
            applied_step=31,
        )
        wait.until(ec.text_to_be_present_in_element((By.ID, "lr-message"), "step 31"))
        assert browser.find_element(By.ID, "lr-current").text == "0.01"
    finally:
        channel.close()
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []


def test_history_longer_than_one_page_is_drawn_whole(sqlite_api: ApiHarness, browser: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    _, headers = sqlite_api.make_user()
    job_id = sqlite_api.client.post("/v1/jobs", json=digits_spec(name="long-job"), headers=headers)
    job_id = job_id.json()["id"]
    names = ("lr", "train_accuracy", "train_loss")
    steps = 2100  # 6300 points: the page loads them in two pages of at most 5000
    with sqlite_api.sessions() as session:
        repositories.add_metric_points(session, job_id=job_id, points=[
            repositories.MetricPointIn(step=step, epoch=0, name=name, value=1.0 / step)
            for step in range(1, steps + 1) for name in names
        ])
        session.commit()
    wait = WebDriverWait(browser, 20)
    browser.get(sqlite_api.url + "/")
    browser.find_element(By.ID, "token-input").send_keys(headers["Authorization"].split()[1])
    browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
    wait.until(ec.element_to_be_clickable(
        (By.CSS_SELECTOR, f'#jobs tr[data-job-id="{job_id}"]')
    )).click()
    wait.until(lambda d: d.find_element(By.ID, "chart").get_attribute("data-points")
               == str(steps * len(names)))
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
