"""The dashboard in a real headless Chromium against a real api and Redis.

Each test saves screenshots of the states it checks under its pytest tmp dir.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core import repositories
from core.channel import Channel
from core.models import JobStatus
from tests.api.browser import requires_chromium
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness

pytestmark = requires_chromium


def _sign_in(api: ApiHarness, browser: Any, headers: dict[str, str]) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.set_window_size(1300, 1800)
    browser.get(api.url + "/")
    browser.find_element(By.ID, "token-input").send_keys(headers["Authorization"].split()[1])
    browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
    return WebDriverWait(browser, 20)


def _open_job(browser: Any, wait: Any, job_id: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    wait.until(ec.element_to_be_clickable(
        (By.CSS_SELECTOR, f'#jobs tr[data-job-id="{job_id}"]')
    )).click()
    wait.until(lambda d: d.execute_script("return jobView.job && jobView.job.id") == job_id)


def _visible_controls(browser: Any) -> list[str]:
    return list(browser.execute_script(
        "return [...document.querySelectorAll('.controls button')]"
        ".filter(b => !b.hidden).map(b => b.dataset.action)"
    ))


def _axis_ticks(browser: Any, family: str) -> list[str]:
    """The y-axis tick labels uPlot drew on a panel's canvas."""
    return list(browser.execute_script(
        "const p = jobView.panels.panels.get(arguments[0]);"
        "return p ? (p.plot.axes[1]._values || []).map(String) : [];", family
    ))


def _no_console_errors(browser: Any, expected: str | None = None) -> None:
    """No script errors; ``expected`` names a failed request the test made on purpose."""
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"
              and not (expected and e["source"] == "network" and expected in e["message"])]
    assert errors == []


def _seed_points(api: ApiHarness, job_id: str, steps: range, names: dict[str, Any]) -> None:
    with api.sessions() as session:
        repositories.add_metric_points(session, job_id=job_id, points=[
            repositories.MetricPointIn(step=s, epoch=(s - 1) // 100, name=name, value=f(s))
            for name, f in names.items() for s in steps
        ])
        session.commit()


def test_running_job_charts_lr_marker_and_pause(
    sqlite_api: ApiHarness, browser: Any, redis_url: str, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    _, headers = sqlite_api.make_user()
    job_id = sqlite_api.client.post("/v1/jobs", json=digits_spec(name="browser-job"),
                                    headers=headers).json()["id"]
    wait = _sign_in(sqlite_api, browser, headers)
    row = wait.until(ec.presence_of_element_located(
        (By.CSS_SELECTOR, f'#jobs tr[data-job-id="{job_id}"]')
    ))
    assert job_id[:8] in row.text and "browser-job" in row.text and "queued" in row.text
    assert "0/10" in row.text  # epochs done / the spec's epochs
    _open_job(browser, wait, job_id)
    assert _visible_controls(browser) == ["pause", "cancel"]
    wait.until(ec.text_to_be_present_in_element((By.ID, "stream-state"), "waiting"))
    assert "epochs: 10" in browser.find_element(By.ID, "job-spec").text

    channel = Channel.from_url(redis_url)
    try:
        with sqlite_api.sessions() as session:  # what a worker does when it starts the job
            repositories.transition_job(session, job_id=job_id, to_status=JobStatus.RUNNING)
            session.commit()
        channel.publish_status(job_id, "running")
        stored = []
        for step in range(1, 41):
            loss = 2.0 / step
            values = {"train_loss": loss, "train_cross-entropy": loss,
                      "train_accuracy": 0.937 + step * 0.0015, "lr": 0.001}
            channel.publish_metric(job_id, step=step, epoch=(step - 1) // 20, values=values)
            stored += [repositories.MetricPointIn(step=step, epoch=(step - 1) // 20, name=k,
                                                  value=v) for k, v in values.items()]
        with sqlite_api.sessions() as session:  # the worker's batched copy in the database
            repositories.add_metric_points(session, job_id=job_id, points=stored)
            session.commit()
        wait.until(ec.text_to_be_present_in_element((By.ID, "stream-state"), "live"))
        wait.until(lambda d: d.find_element(By.ID, "charts").get_attribute("data-points")
                   == str(40 * 4))
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#charts .panel")) == 3)
        families = [p.get_attribute("data-family")
                    for p in browser.find_elements(By.CSS_SELECTOR, "#charts .panel")]
        assert families == ["loss", "lr", "metrics"]
        # loss and cross-entropy hold the same numbers: one line, both names
        loss_legend = browser.find_element(By.CSS_SELECTOR, '.panel[data-family="loss"] .u-legend')
        assert "train_loss = train_cross-entropy" in loss_legend.text
        assert browser.execute_script(
            "return jobView.panels.panels.get('loss').plot.series.length") == 2
        # real axes: accuracy 0.9385..0.997 gets ticks inside that range, not 0..1 swings
        ticks = [float(t) for t in _axis_ticks(browser, "metrics")]
        assert len(ticks) >= 3 and 0.9 < min(ticks) and max(ticks) < 1.01
        assert _axis_ticks(browser, "loss")
        assert browser.execute_script(
            "return jobView.panels.panels.get('lr').plot.scales.y.distr") == 3  # log axis
        assert browser.find_element(By.ID, "job-step").text == "40"
        assert browser.find_element(By.ID, "job-epoch").text == "1/10"
        browser.save_screenshot(str(tmp_path / "1-running.png"))
        # the smoothing slider adds an EMA line per series; the raw one stays, faded
        browser.execute_script("const s = document.getElementById('smoothing'); s.value = 0.6;"
                               "s.dispatchEvent(new Event('input'));")
        wait.until(lambda d: d.execute_script(
            "return jobView.panels.panels.get('loss').plot.series.length") == 3)
        smoothed = browser.execute_script(
            "return jobView.panels.panels.get('loss').plot.data[2].slice(0, 2)")
        assert smoothed[0] == 2.0 and abs(smoothed[1] - (0.6 * 0.4 * 2.0 + 0.4 * 1.0) / 0.64) < 1e-9
        browser.execute_script("const s = document.getElementById('smoothing'); s.value = 0;"
                               "s.dispatchEvent(new Event('input'));")
        wait.until(lambda d: d.execute_script(
            "return jobView.panels.panels.get('loss').plot.series.length") == 2)
        # drag across the loss panel: every panel zooms to the same steps
        from selenium.webdriver.common.action_chains import ActionChains
        over = browser.find_element(By.CSS_SELECTOR, '.panel[data-family="loss"] .u-over')
        ActionChains(browser).move_to_element_with_offset(over, -200, 0).click_and_hold() \
            .move_by_offset(200, 0).release().perform()
        ranges = browser.execute_script(
            "return [...jobView.panels.panels.values()].map(p => [p.plot.scales.x.min,"
            " p.plot.scales.x.max])")
        assert len({tuple(r) for r in ranges}) == 1
        low, high = ranges[0]
        assert 1 < low < high < 40 and high - low < 20
        ActionChains(browser).double_click(over).perform()  # back to every step
        wait.until(lambda d: d.execute_script(
            "return jobView.panels.panels.get('metrics').plot.scales.x.max") == 40)

        # change the learning rate from the page; a worker applies it at step 31
        browser.find_element(By.ID, "lr-input").send_keys("0.01")
        browser.find_element(By.CSS_SELECTOR, "#lr-form button").click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "lr-message"), "pending"))
        [command] = channel.read_commands(job_id)
        assert command.type == "set_lr" and command.data["learning_rate"] == 0.01
        with sqlite_api.sessions() as session:
            repositories.mark_lr_change_applied(
                session, change_id=command.command_id, applied_step=31, applied_lr=0.01
            )
            session.commit()
        channel.publish_lr_applied(
            job_id, change_id=command.command_id, learning_rate=0.01, mode="scale",
            applied_step=31,
        )
        wait.until(ec.text_to_be_present_in_element((By.ID, "lr-message"), "step 31"))
        assert browser.find_element(By.ID, "lr-current").text == "0.01"
        reported = sqlite_api.client.get(f"/v1/jobs/{job_id}/learning-rate",
                                         headers=headers).json()["changes"][0]["applied_step"]
        assert reported == 31
        marker_css = f'.panel[data-family="loss"] .marker-lr[data-step="{reported}"]'
        marker = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, marker_css)))
        # drawn at x(31) of the panel's step axis, with what/who on hover
        expected_x = browser.execute_script(
            "return jobView.panels.panels.get('loss').plot.valToPos(31, 'x')")
        assert abs(float(marker.value_of_css_property("left")[:-2]) - expected_x) < 1.5
        browser.execute_script("arguments[0].focus()", marker)
        tip = marker.find_element(By.CSS_SELECTOR, ".marker-tip").text
        assert "lr 0.01" in tip and "scale" in tip and "applied at step 31" in tip
        browser.save_screenshot(str(tmp_path / "2-lr-marker.png"))

        # pause from the page; the worker stops and reports it
        browser.find_element(By.CSS_SELECTOR, '.controls button[data-action="pause"]').click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "control-message"), "sent"))
        with sqlite_api.sessions() as session:
            repositories.transition_job(session, job_id=job_id, to_status=JobStatus.PAUSED,
                                        reason="paused by the user")
            session.commit()
        channel.publish_status(job_id, "paused", reason="paused by the user", step=40)
        wait.until(ec.text_to_be_present_in_element((By.ID, "job-status"), "paused"))
        wait.until(ec.text_to_be_present_in_element((By.ID, "stream-state"), "paused"))
        assert "live" not in browser.find_element(By.ID, "stream-state").text
        assert _visible_controls(browser) == ["resume", "cancel"]
        wait.until(ec.presence_of_element_located(
            (By.CSS_SELECTOR, '.panel[data-family="loss"] .marker-status[data-step="40"]')))
        assert "paused" in browser.find_element(By.ID, "timeline").text
        browser.save_screenshot(str(tmp_path / "3-paused.png"))
    finally:
        channel.close()
    _no_console_errors(browser)


def test_failed_job_shows_its_reason_and_no_controls(
    sqlite_api: ApiHarness, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    _, headers = sqlite_api.make_user()
    job_id = sqlite_api.client.post("/v1/jobs", json=digits_spec(name="doomed"),
                                    headers=headers).json()["id"]
    _seed_points(sqlite_api, job_id, range(1, 51), {"train_loss": lambda s: 1.0 / s})
    with sqlite_api.sessions() as session:
        repositories.transition_job(session, job_id=job_id, to_status=JobStatus.RUNNING)
        repositories.transition_job(session, job_id=job_id, to_status=JobStatus.FAILED,
                                    reason="loss became NaN at step 51")
        session.commit()
    wait = _sign_in(sqlite_api, browser, headers)
    _open_job(browser, wait, job_id)
    banner = browser.find_element(By.ID, "job-reason")
    assert banner.is_displayed() and "loss became NaN at step 51" in banner.text
    assert _visible_controls(browser) == []
    assert not browser.find_element(By.ID, "lr-form").is_displayed()
    wait.until(lambda d: d.find_element(By.ID, "charts").get_attribute("data-points") == "50")
    assert browser.find_element(By.ID, "stream-state").text == "finished"
    browser.save_screenshot(str(tmp_path / "failed.png"))
    _no_console_errors(browser)


def test_compare_overlays_two_jobs_and_lists_differing_fields(
    sqlite_api: ApiHarness, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    _, headers = sqlite_api.make_user()
    ids = []
    for name, lr in (("run-a", 0.001), ("run-b", 0.01)):
        spec = digits_spec(name=name)
        spec["optimizer"]["learning_rate"] = lr
        job_id = sqlite_api.client.post("/v1/jobs", json=spec, headers=headers).json()["id"]
        _seed_points(sqlite_api, job_id, range(1, 201),
                     {"val_accuracy": lambda s, lr=lr: 0.5 + lr * s}, )
        ids.append(job_id)
    wait = _sign_in(sqlite_api, browser, headers)
    for job_id in ids:
        tick = wait.until(lambda d, j=job_id: d.find_element(
            By.CSS_SELECTOR, f'#jobs tr[data-job-id="{j}"] .compare-tick'))
        tick.click()
    browser.find_element(By.ID, "compare-selected").click()
    wait.until(lambda d: d.find_element(By.ID, "compare-grid").get_attribute("data-jobs") == "2")
    grid = browser.find_element(By.ID, "compare-grid")
    assert grid.get_attribute("data-metrics") == "val_accuracy"
    assert grid.get_attribute("data-points") == "400"
    chart = grid.find_element(By.CSS_SELECTOR, '.panel[data-metric="val_accuracy"]')
    legend = chart.find_element(By.CSS_SELECTOR, ".u-legend").text
    assert "run-a" in legend and "run-b" in legend
    row = browser.find_element(By.CSS_SELECTOR,
                               '#compare-diff tr[data-field="optimizer.learning_rate"]')
    assert "0.001" in row.text and "0.01" in row.text
    fields = [r.get_attribute("data-field")
              for r in browser.find_elements(By.CSS_SELECTOR, "#compare-diff tbody tr")]
    assert set(fields) == {"name", "optimizer.learning_rate"}
    browser.save_screenshot(str(tmp_path / "compare.png"))
    _no_console_errors(browser)


BAD_SPEC = """\
name: bad-lr
model:
  - type: Dense
    units: 10
data:
  train: {builtin: digits, split: train}
  batch_size: 64
loss: {type: softmax_cross_entropy}
optimizer:
  type: sgd
  learning_rate: 0.5
epochs: 0
"""


def test_submitting_a_bad_spec_shows_the_field_error_next_to_it(
    sqlite_api: ApiHarness, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    _, headers = sqlite_api.make_user()
    wait = _sign_in(sqlite_api, browser, headers)
    wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, '#tabs button[data-view="submit"]')))
    browser.find_element(By.CSS_SELECTOR, '#tabs button[data-view="submit"]').click()
    browser.find_element(By.ID, "spec-text").send_keys(BAD_SPEC)
    browser.find_element(By.CSS_SELECTOR, "#submit-form button").click()
    error = wait.until(ec.presence_of_element_located(
        (By.CSS_SELECTOR, '.field-error[data-field="epochs"]')))
    api_error = sqlite_api.client.post("/v1/jobs", json={
        "name": "bad-lr", "model": [{"type": "Dense", "units": 10}],
        "data": {"train": {"builtin": "digits", "split": "train"}, "batch_size": 64},
        "loss": {"type": "softmax_cross_entropy"},
        "optimizer": {"type": "sgd", "learning_rate": 0.5}, "epochs": 0,
    }, headers=headers).json()["error"]["details"][0]
    assert api_error["field"] == "epochs"
    assert api_error["message"] in error.text
    # shown beside the spec line that holds the field
    line = error.find_element(By.XPATH, "..").find_element(By.TAG_NAME, "code").text
    assert line == "12 | epochs: 0"
    browser.save_screenshot(str(tmp_path / "submit-error.png"))
    assert sqlite_api.client.get("/v1/jobs", headers=headers).json()["data"] == []

    browser.find_element(By.ID, "spec-text").clear()
    browser.find_element(By.ID, "spec-text").send_keys(BAD_SPEC.replace("epochs: 0", "epochs: 2"))
    browser.find_element(By.CSS_SELECTOR, "#submit-form button").click()
    wait.until(lambda d: d.execute_script("return jobView.job && jobView.job.name") == "bad-lr")
    _no_console_errors(browser, expected="status of 422")


def test_history_longer_than_one_page_is_drawn_whole(sqlite_api: ApiHarness, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    _, headers = sqlite_api.make_user()
    job_id = sqlite_api.client.post("/v1/jobs", json=digits_spec(name="long-job"), headers=headers)
    job_id = job_id.json()["id"]
    steps = 2100  # more than one page of the paged endpoint; thinned to 2000 per metric
    _seed_points(sqlite_api, job_id, range(1, steps + 1),
                 {name: (lambda s: 1.0 / s) for name in ("lr", "train_accuracy", "train_loss")})
    wait = _sign_in(sqlite_api, browser, headers)
    _open_job(browser, wait, job_id)
    wait.until(lambda d: d.find_element(By.ID, "charts").get_attribute("data-total")
               == str(steps * 3))
    # The history is in the store at once; its panels are built on the next frame.
    shown = wait.until(lambda d: d.execute_script(
        "const p = jobView.panels.panels.get('loss'); return p && p.plot.data[0]"))
    assert shown[0] == 1 and shown[-1] == steps and len(shown) <= 2000
    _no_console_errors(browser)
