"""The job page as a monitor, in a real Chromium driven by mouse and keyboard: zoom that
holds while points arrive, running time across restarts and an ETA from the recent pace,
log times, epoch boundaries, smoothing, log scale and x axes (issue 26, items 5-9, 11)."""

from __future__ import annotations

import re
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from core import repositories
from core.channel import Channel
from core.models import JobStatus, utcnow
from tests.api.browser import requires_chromium
from tests.api.dashboard_pages import (
    drag,
    no_console_errors,
    open_job,
    panels_ready,
    seed_points,
    set_history,
    sign_in,
    x_ranges,
)
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness

pytestmark = requires_chromium


def _running_job(api: ApiHarness, headers: dict[str, str], name: str, **spec: Any) -> str:
    job_id = str(api.client.post("/v1/jobs", json=digits_spec(name=name, **spec),
                                 headers=headers).json()["id"])
    with api.sessions() as session:
        repositories.transition_job(session, job_id=job_id, to_status=JobStatus.RUNNING)
        session.commit()
    return job_id


def _seconds(text: str) -> int:
    """"2m 14s" / "1h 3m" / "45s" -> seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([hms])", text))


def test_zoom_holds_while_points_arrive_until_double_click(
    sqlite_api: ApiHarness, browser: Any, redis_url: str, tmp_path: Path
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    _, headers = sqlite_api.make_user()
    job_id = _running_job(sqlite_api, headers, "zoom-live")
    channel = Channel.from_url(redis_url)
    try:
        def publish(steps: range) -> None:
            for step in steps:
                channel.publish_metric(job_id, step=step, epoch=(step - 1) // 50, values={
                    "train_loss": 2.0 / step, "train_accuracy": step / 200, "lr": 0.01})

        publish(range(1, 101))
        wait = sign_in(sqlite_api, browser, headers)
        open_job(browser, wait, job_id)
        wait.until(lambda d: d.find_element(By.ID, "charts").get_attribute("data-points") == "300")
        wait.until(lambda d: panels_ready(d, 3))
        over = browser.find_element(By.CSS_SELECTOR, '.panel[data-family="loss"] .u-over')
        drag(browser, over, -250, 200)
        zoomed = x_ranges(browser)
        assert len({tuple(r) for r in zoomed}) == 1  # every panel, the same steps
        low, high = zoomed[0]
        assert 1 < low < high < 100

        publish(range(101, 201))  # the job goes on: new points arrive while zoomed
        wait.until(lambda d: d.find_element(By.ID, "charts").get_attribute("data-points") == "600")
        time.sleep(0.5)  # a few frames: each one redraws with the new data
        assert x_ranges(browser) == zoomed
        shown = browser.execute_script(
            "return jobView.panels.panels.get('loss').plot.data[0].slice(-1)[0]")
        assert shown == 200  # the data is there, only the view holds
        browser.save_screenshot(str(tmp_path / "zoom-held.png"))

        ActionChains(browser).double_click(over).perform()
        wait.until(lambda d: all(r == [1, 200] for r in x_ranges(d)))
        publish(range(201, 221))  # unzoomed, the view follows the run again
        wait.until(lambda d: all(r == [1, 220] for r in x_ranges(d)))
    finally:
        channel.close()
    no_console_errors(browser)


def test_duration_counts_every_run_and_eta_follows_the_recent_pace(
    sqlite_api: ApiHarness, browser: Any, redis_url: str, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    _, headers = sqlite_api.make_user()
    job_id = str(sqlite_api.client.post("/v1/jobs", json=digits_spec(name="resumed"),
                                        headers=headers).json()["id"])
    # ran 100 s, paused, resumed 30 s ago: 130 s of training, 30 s since started_at
    set_history(sqlite_api, job_id, [("running", 400), ("paused", 300), ("queued", 100),
                                     ("running", 30)])
    now = utcnow()
    # 50 steps an epoch; the last minute at 2 steps/s (an hour ago it was far slower)
    times = {s: now - timedelta(seconds=50 - s * 0.5) for s in range(1, 101)}
    times[1] = now - timedelta(hours=1)
    seed_points(sqlite_api, job_id, [(s, (s - 1) // 50, "train_loss", 1.0 / s)
                                     for s in range(1, 101)], times)
    seed_points(sqlite_api, job_id, [(50, 0, "val_loss", 0.5), (100, 1, "val_loss", 0.4)],
                times)
    with sqlite_api.sessions() as session:
        repositories.update_job_progress(session, job_id=job_id, epoch=2, step=100)
        session.commit()

    body = sqlite_api.client.get(f"/v1/jobs/{job_id}", headers=headers).json()
    assert 130 <= body["running_seconds"] < 140
    assert abs(body["steps_per_second"] - 2.0) < 0.05
    listed = sqlite_api.client.get("/v1/jobs", headers=headers).json()["data"][0]
    assert 130 <= listed["running_seconds"] < 140 and listed["steps_per_second"] is None

    wait = sign_in(sqlite_api, browser, headers)
    row = wait.until(ec.presence_of_element_located(
        (By.CSS_SELECTOR, f'#jobs tr[data-job-id="{job_id}"] td.duration')))
    assert 130 <= _seconds(row.text) < 150
    open_job(browser, wait, job_id)
    wait.until(ec.text_to_be_present_in_element((By.ID, "job-eta"), "ETA"))
    # 10 epochs x 50 steps, 400 to go at 2 steps/s
    eta = browser.find_element(By.ID, "job-eta").text
    assert 195 <= _seconds(eta.split("(")[0]) <= 205, eta
    assert 130 <= _seconds(browser.find_element(By.ID, "job-duration").text) < 150
    browser.save_screenshot(str(tmp_path / "eta.png"))

    channel = Channel.from_url(redis_url)
    try:
        with sqlite_api.sessions() as session:
            repositories.transition_job(session, job_id=job_id, to_status=JobStatus.SUCCEEDED)
            session.commit()
        channel.publish_status(job_id, "succeeded")
        wait.until(ec.text_to_be_present_in_element((By.ID, "job-status"), "succeeded"))
        assert browser.find_element(By.ID, "job-eta").text == ""
        frozen = browser.find_element(By.ID, "job-duration").text
        time.sleep(2.2)
        assert browser.find_element(By.ID, "job-duration").text == frozen
    finally:
        channel.close()
    no_console_errors(browser)


def test_log_lines_show_when_they_happened(
    sqlite_api: ApiHarness, browser: Any, redis_url: str
) -> None:
    from selenium.webdriver.common.by import By

    _, headers = sqlite_api.make_user()
    job_id = _running_job(sqlite_api, headers, "logs")
    channel = Channel.from_url(redis_url)
    try:
        entry_id = channel.publish_log(job_id, level="warning", message="loss spiked at step 7")
        time.sleep(3)  # the page opens (and receives the line) well after it happened
        wait = sign_in(sqlite_api, browser, headers)
        open_job(browser, wait, job_id)
        item = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#log li.log-warning"))
        happened_ms = int(entry_id.split("-")[0])
        expected = browser.execute_script(
            "return new Date(arguments[0]).toLocaleTimeString()", happened_ms)
        received = browser.execute_script("return new Date().toLocaleTimeString()")
        assert expected != received
        assert item.text.startswith(expected) and "loss spiked at step 7" in item.text
    finally:
        channel.close()
    no_console_errors(browser)


def test_epoch_boundaries_come_from_recorded_epochs_and_labels_fit(
    sqlite_api: ApiHarness, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    _, headers = sqlite_api.make_user()
    job_id = _running_job(sqlite_api, headers, "eighty-epochs", epochs=80)
    per_epoch = 37  # train points every 10 steps: an epoch's first report is not its start
    last = 80 * per_epoch
    points = [(s, (s - 1) // per_epoch, "train_loss", 3.0 / s ** 0.5)
              for s in range(10, last + 1, 10)]
    points += [(per_epoch * (e + 1), e, "val_loss", 2.0 / (e + 1)) for e in range(80)]
    seed_points(sqlite_api, job_id, points)
    wait = sign_in(sqlite_api, browser, headers)
    open_job(browser, wait, job_id)
    wait.until(lambda d: panels_ready(d, 1))
    ends = browser.execute_script("return jobView.panels.store.epochEnds()")
    assert ends == [[e, per_epoch * e] for e in range(1, 80)]
    drawn = browser.execute_script(
        "const p = jobView.panels.panels.get('loss');"
        "return {lines: p.epochLines, labels: p.epochLabels,"
        " x: p.plot.valToPos(arguments[0], 'x')};", per_epoch * 40)
    labels = drawn["labels"]
    assert 3 <= len(labels) < 40  # thinned: not 79 labels on top of each other
    for a, b in zip(labels, labels[1:], strict=False):
        assert b["x"] - a["x"] >= a["width"], (a, b)
    assert all(label["epoch"] % (labels[1]["epoch"] - labels[0]["epoch"]) == 0 for label in labels)
    epoch_40 = next((label for label in labels if label["epoch"] == 40), None)
    if epoch_40 is not None:  # drawn where epoch 39's last step is
        assert abs(epoch_40["x"] - drawn["x"]) < 1
    # the canvas really has the dashed line at that step: count inked pixels in its column
    inked = browser.execute_script(
        "const u = jobView.panels.panels.get('loss').plot;"
        "const x = Math.round(u.valToPos(arguments[0], 'x', true));"
        "const {top, height} = u.bbox;"
        "const px = u.ctx.getImageData(x, top, 1, height).data; let n = 0;"
        "for (let i = 0; i < px.length; i += 4) if (px[i + 3] > 0 && px[i] < 200) n++;"
        "return [n, height];", per_epoch * 40)
    assert inked[0] > inked[1] / 5, inked
    browser.find_element(By.CSS_SELECTOR, '.panel[data-family="loss"]').screenshot(
        str(tmp_path / "epochs.png"))
    no_console_errors(browser)


def test_smoothing_spares_the_lr_panel_and_validation_series(
    sqlite_api: ApiHarness, browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    _, headers = sqlite_api.make_user()
    job_id = _running_job(sqlite_api, headers, "smooth")
    points = [(s, (s - 1) // 50, "train_loss", 1.0 / s + (0.3 if s % 2 else 0.0))
              for s in range(1, 201)]
    points += [(s, (s - 1) // 50, "lr", 0.1 if s <= 100 else 0.01) for s in range(1, 201)]
    points += [(50 * e, e - 1, "val_loss", 1.0 / e) for e in range(1, 5)]
    seed_points(sqlite_api, job_id, points)
    wait = sign_in(sqlite_api, browser, headers)
    open_job(browser, wait, job_id)
    wait.until(lambda d: panels_ready(d, 2))
    slider = browser.find_element(By.ID, "smoothing")
    slider.click()
    slider.send_keys(Keys.END)  # 0.99: as smooth as it goes
    assert browser.find_element(By.ID, "smoothing-value").text == "0.99"
    labels = "return jobView.panels.panels.get(arguments[0]).plot.series.slice(1).map(s => s.label)"
    wait.until(lambda d: "train_loss (smoothed)" in d.execute_script(labels, "loss"))
    assert browser.execute_script(labels, "loss") == [
        "train_loss", "train_loss (smoothed)", "val_loss"]
    assert browser.execute_script(labels, "lr") == ["lr"]
    lr = browser.execute_script(
        "const p = jobView.panels.panels.get('lr').plot; return p.data[1].filter(v => v !== null)")
    assert sorted(set(lr)) == [0.01, 0.1]  # still a step, not a ramp
    # the raw training curve stays, faint, behind the smoothed one
    strokes = browser.execute_script(
        "return jobView.panels.panels.get('loss').plot.series.slice(1, 3).map(s => s._stroke)")
    assert strokes[0].startswith("rgba(") and strokes[0].endswith(",0.25)")
    assert not strokes[1].startswith("rgba(")
    val = browser.execute_script(
        "const p = jobView.panels.panels.get('loss').plot;"
        "return p.data[3].filter(v => v !== null)")
    assert val == [1.0, 0.5, 1 / 3, 0.25]
    no_console_errors(browser)


def test_log_scale_per_panel_and_the_four_x_axes(
    sqlite_api: ApiHarness, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    _, headers = sqlite_api.make_user()
    job_id = _running_job(sqlite_api, headers, "axes")
    start = utcnow() - timedelta(minutes=10)
    times = {s: start + timedelta(seconds=s * 2) for s in range(1, 201)}
    points = [(s, (s - 1) // 50, "train_loss", 5.0 / s) for s in range(1, 201)]
    points += [(s, (s - 1) // 50, "train_accuracy", s / 200) for s in range(1, 201)]
    points += [(50 * e, e - 1, "val_accuracy", e / 4) for e in range(1, 5)]
    seed_points(sqlite_api, job_id, points, times)
    wait = sign_in(sqlite_api, browser, headers)
    open_job(browser, wait, job_id)
    wait.until(lambda d: panels_ready(d, 2))
    distr = "return jobView.panels.panels.get(arguments[0]).plot.scales.y.distr"
    toggle = browser.find_element(By.CSS_SELECTOR, '.panel[data-family="loss"] .log-toggle')
    assert toggle.text == "linear scale" and browser.execute_script(distr, "loss") == 1
    toggle.click()
    wait.until(lambda d: d.execute_script(distr, "loss") == 3)
    assert browser.find_element(
        By.CSS_SELECTOR, '.panel[data-family="loss"] .log-toggle').text == "log scale"
    assert browser.execute_script(distr, "metrics") == 1  # only that panel
    browser.save_screenshot(str(tmp_path / "log-loss.png"))

    xs = "return jobView.panels.panels.get('metrics').plot.data[0]"
    axis = Select(browser.find_element(By.ID, "x-axis"))
    axis.select_by_visible_text("epoch")
    wait.until(lambda d: d.find_element(By.ID, "charts").get_attribute("data-x-mode") == "epoch")
    wait.until(lambda d: d.execute_script(xs)[49] == 1)  # step 50 ends epoch 0
    epochs = browser.execute_script(xs)
    assert epochs[99] == 2 and abs(epochs[24] - 0.5) < 0.03
    axis.select_by_visible_text("wall-clock time")
    wait.until(lambda d: d.execute_script("return jobView.panels.panels.get('metrics')"
                                          ".plot.scales.x.time") is True)
    wall = browser.execute_script(xs)
    assert abs(wall[0] - times[1].timestamp()) < 0.01
    assert abs(wall[-1] - times[200].timestamp()) < 0.01
    axis.select_by_visible_text("relative time")
    wait.until(lambda d: d.find_element(By.ID, "charts").get_attribute("data-x-mode")
               == "relative")
    wait.until(lambda d: d.execute_script(xs)[0] == 0)
    assert abs(browser.execute_script(xs)[-1] - 398) < 0.01
    ticks = browser.execute_script(
        "return jobView.panels.panels.get('metrics').plot.axes[0]._values")
    assert any(re.fullmatch(r"\d+m \d\ds", t) for t in ticks), ticks
    no_console_errors(browser)
