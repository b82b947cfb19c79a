"""The dashboard's views in a real Chromium: deep links with reload and back/forward,
compare as a grid with each run's steering markers, lineage and steering markers on the
job page, and the empty and error states (issue 26 items 10, 12, 14; issue 24's views)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sqlalchemy import update

from core import repositories
from core.commands import FreezeCommand
from core.models import Job, JobStatus, LRChangeMode
from tests.api.browser import requires_chromium
from tests.api.dashboard_pages import no_console_errors, open_job, seed_points, sign_in
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness

pytestmark = requires_chromium


def _job(api: ApiHarness, headers: dict[str, str], name: str, **spec: Any) -> str:
    response = api.client.post("/v1/jobs", json=digits_spec(name=name, **spec), headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _curve(api: ApiHarness, job_id: str, steps: range, scale: float = 1.0) -> None:
    seed_points(api, job_id, [(s, (s - 1) // 50, "train_loss", scale / s) for s in steps]
                + [(s, (s - 1) // 50, "lr", 0.001) for s in steps]
                + [(s, (s - 1) // 50, "val_accuracy", 1 - scale / s) for s in steps if s % 50 == 0])


def _applied_lr(api: ApiHarness, job_id: str, user_id: str, lr: float, step: int,
                mode: LRChangeMode = LRChangeMode.SCALE) -> None:
    with api.sessions() as session:
        change = repositories.create_lr_change(session, job_id=job_id, requested_lr=lr,
                                               mode=mode, requested_by=user_id)
        repositories.mark_lr_change_applied(session, change_id=change.id, applied_step=step,
                                            applied_lr=lr)
        session.commit()


def _applied_freeze(api: ApiHarness, job_id: str, user_id: str, step: int) -> None:
    with api.sessions() as session:
        command = FreezeCommand(pattern="dense0_", requested_by=user_id)
        repositories.create_command(session, job_id=job_id, command=command)
        repositories.mark_command_applied(session, command_id=command.command_id,
                                          applied_step=step)
        session.commit()


def _path(browser: Any) -> str:
    return str(browser.execute_script("return location.pathname + location.search"))


def test_every_view_has_a_url_that_survives_reload_and_back_forward(
    sqlite_api: ApiHarness, browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    _, headers = sqlite_api.make_user()
    ids = [_job(sqlite_api, headers, f"link-{i}") for i in range(2)]
    for job_id in ids:
        _curve(sqlite_api, job_id, range(1, 101))
    wait = sign_in(sqlite_api, browser, headers)
    open_job(browser, wait, ids[0])
    assert _path(browser) == f"/jobs/{ids[0]}"
    browser.refresh()  # the token is kept in this tab: the same job opens again
    wait.until(lambda d: d.execute_script("return jobView.job && jobView.job.id") == ids[0])
    assert browser.find_element(By.ID, "job-card").is_displayed()

    for job_id in ids:
        wait.until(ec.element_to_be_clickable(
            (By.CSS_SELECTOR, f'#jobs tr[data-job-id="{job_id}"] .compare-tick'))).click()
    browser.find_element(By.ID, "compare-selected").click()
    wait.until(lambda d: _path(d).startswith("/compare?jobs="))
    assert set(_path(browser).split("jobs=")[1].split("&")[0].split(",")) == set(ids)
    wait.until(lambda d: d.find_element(By.ID, "compare-grid").get_attribute("data-jobs") == "2")
    compare_url = _path(browser)
    browser.refresh()
    wait.until(lambda d: d.find_element(By.ID, "compare-grid").get_attribute("data-jobs") == "2")
    assert _path(browser) == compare_url

    browser.find_element(By.CSS_SELECTOR, '#tabs button[data-view="submit"]').click()
    wait.until(lambda d: _path(d) == "/submit")
    assert browser.find_element(By.ID, "view-submit").is_displayed()
    browser.back()
    wait.until(lambda d: d.find_element(By.ID, "view-compare").is_displayed())
    assert _path(browser) == compare_url
    browser.back()
    wait.until(lambda d: d.find_element(By.ID, "job-card").is_displayed())
    assert _path(browser) == f"/jobs/{ids[0]}"
    assert browser.execute_script("return jobView.job.id") == ids[0]
    browser.forward()
    wait.until(lambda d: d.find_element(By.ID, "view-compare").is_displayed())

    browser.get(sqlite_api.url + "/system")  # typed in: the view opens signed in
    wait.until(lambda d: d.find_element(By.ID, "view-system").is_displayed())
    browser.get(sqlite_api.url + f"/jobs/{ids[1]}")
    wait.until(lambda d: d.execute_script("return jobView.job && jobView.job.id") == ids[1])
    no_console_errors(browser)


def test_compare_grid_with_markers_smoothing_and_layers_aligned_by_type(
    sqlite_api: ApiHarness, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    user_id, headers = sqlite_api.make_user()
    with_norm = digits_spec()["model"]
    with_norm.insert(1, {"type": "BatchNorm"})
    ids = [_job(sqlite_api, headers, "run-a"), _job(sqlite_api, headers, "run-b"),
           _job(sqlite_api, headers, "run-c", model=with_norm)]
    for i, job_id in enumerate(ids):
        _curve(sqlite_api, job_id, range(1, 201), scale=1.0 + i)
    _applied_lr(sqlite_api, ids[1], user_id, 0.01, 60)
    _applied_freeze(sqlite_api, ids[2], user_id, 120)
    wait = sign_in(sqlite_api, browser, headers)
    for job_id in ids:
        wait.until(lambda d, j=job_id: d.find_element(
            By.CSS_SELECTOR, f'#jobs tr[data-job-id="{j}"] .compare-tick')).click()
    browser.find_element(By.ID, "compare-selected").click()
    grid = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, '#compare-grid[data-jobs="3"]'))
    panels = [p.get_attribute("data-metric") for p in grid.find_elements(By.CSS_SELECTOR, ".panel")]
    assert panels == ["train_loss", "val_accuracy", "lr"]  # several metrics at once
    legend = grid.find_element(By.CSS_SELECTOR, '.panel[data-metric="train_loss"] .u-legend').text
    assert all(name in legend for name in ("run-a", "run-b", "run-c"))
    # each run's steering markers, in that run's colour
    lr_mark = grid.find_element(By.CSS_SELECTOR,
                                f'.panel[data-metric="train_loss"] .marker[data-run="{ids[1]}"]')
    assert lr_mark.get_attribute("data-step") == "60" and lr_mark.get_attribute("data-kind") == "lr"
    freeze = grid.find_element(By.CSS_SELECTOR,
                               f'.panel[data-metric="train_loss"] .marker[data-run="{ids[2]}"]')
    assert freeze.get_attribute("data-command-kind") == "freeze"
    assert freeze.get_attribute("data-step") == "120"

    # untick a metric: its panel goes, and the URL remembers the choice
    browser.find_element(By.CSS_SELECTOR, '#compare-metric-list input[value="lr"]').click()
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#compare-grid .panel")) == 2)
    assert "metrics=train_loss,val_accuracy" in _path(browser)

    slider = browser.find_element(By.ID, "compare-smoothing")
    slider.click()
    slider.send_keys(Keys.END)
    labels = ("return compareView.panels.map(p => p.element.dataset.metric"
              " + ':' + p.plot.series.length)")
    wait.until(lambda d: "train_loss:7" in d.execute_script(labels))  # x + 3 raw + 3 smoothed
    assert "val_accuracy:4" in browser.execute_script(labels)        # per epoch: not smoothed

    fields = {r.get_attribute("data-field"): r.text
              for r in browser.find_elements(By.CSS_SELECTOR, "#compare-diff tbody tr")}
    # the inserted BatchNorm is one row; the Dense and Dropout layers line up by type
    assert set(fields) == {"name", "model.BatchNorm#1"}
    assert "(absent)" in fields["model.BatchNorm#1"]
    browser.save_screenshot(str(tmp_path / "compare-grid.png"))
    no_console_errors(browser)


def test_job_page_shows_steering_markers_lineage_and_abandoned_branches(
    sqlite_api: ApiHarness, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    user_id, headers = sqlite_api.make_user()
    parent = _job(sqlite_api, headers, "parent")
    child = _job(sqlite_api, headers, "child")
    with sqlite_api.sessions() as session:
        session.execute(update(Job).where(Job.id == child).values(parent_id=parent, fork_step=60))
        session.commit()
    _curve(sqlite_api, parent, range(1, 151))
    _curve(sqlite_api, child, range(61, 121), scale=3.0)
    _applied_freeze(sqlite_api, parent, user_id, 40)
    with sqlite_api.sessions() as session:  # a rollback to step 100 set 101..150 aside
        branch = repositories.start_branch(session, job_id=parent, step=100, epoch=2)
        repositories.abandon_metric_points(session, job_id=parent, after_step=100, branch=branch)
        session.commit()
    seed_points(sqlite_api, parent, [(s, (s - 1) // 50, "train_loss", 0.5 / s)
                                     for s in range(101, 131)])

    wait = sign_in(sqlite_api, browser, headers)
    open_job(browser, wait, parent)
    mark = wait.until(lambda d: d.find_element(
        By.CSS_SELECTOR, '.panel[data-family="loss"] .marker-command[data-command-kind="freeze"]'))
    assert mark.get_attribute("data-step") == "40"
    row = browser.find_element(By.CSS_SELECTOR, '#timeline tr[data-command-kind="freeze"]')
    assert "freeze" in row.text and "40" in row.text
    lineage = browser.find_element(By.ID, "lineage")
    assert lineage.is_displayed() and "child" in lineage.text and "from step 60" in lineage.text
    labels = ("const p = jobView.panels.panels.get('loss');"
              "return p && p.plot ? p.plot.series.slice(1).map(s => [s.label, s._stroke]) : []")
    wait.until(lambda d: any("fork child" in label for label, _ in d.execute_script(labels)))
    drawn = dict(browser.execute_script(labels))
    assert drawn["train_loss · rolled back (branch 1)"].startswith("rgba(")  # faded
    assert drawn["train_loss · fork child"].startswith("rgba(")
    xs = browser.execute_script("return jobView.panels.panels.get('loss').plot.data[0]")
    assert xs[-1] == 150  # the abandoned branch still reaches step 150
    browser.save_screenshot(str(tmp_path / "lineage-parent.png"))

    browser.find_element(By.CSS_SELECTOR, f'#lineage a[href="/jobs/{child}"]').click()
    wait.until(lambda d: d.execute_script("return jobView.job && jobView.job.id") == child)
    assert _path(browser) == f"/jobs/{child}"
    wait.until(lambda d: any("parent parent" in label for label, _ in d.execute_script(labels)))
    parent_curve = browser.execute_script(
        "const p = jobView.panels.panels.get('loss').plot;"
        "const i = p.series.findIndex(s => s.label === 'train_loss · parent parent');"
        "return p.data[0].filter((x, k) => p.data[i][k] !== null)")
    assert parent_curve[0] == 1 and parent_curve[-1] == 60  # up to the fork step
    no_console_errors(browser)


def test_empty_and_error_states_say_what_is_going_on(
    sqlite_api: ApiHarness, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    user_id, headers = sqlite_api.make_user()
    job_id = _job(sqlite_api, headers, "cosine-job")
    steps = range(1, 101)
    seed_points(sqlite_api, job_id, [(s, 0, "lr", 1e-4 * 1.047 ** s) for s in steps]
                + [(s, 0, "train_loss", 1.0 / s) for s in steps])
    with sqlite_api.sessions() as session:
        repositories.transition_job(session, job_id=job_id, to_status=JobStatus.RUNNING)
        session.commit()
    _applied_lr(sqlite_api, job_id, user_id, 0.01, 80, mode=LRChangeMode.OVERRIDE)

    wait = sign_in(sqlite_api, browser, headers)
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f'#jobs tr[data-job-id="{job_id}"]'))
    browser.find_element(By.ID, "job-search").send_keys("zzz")
    message = browser.find_element(By.ID, "jobs-no-match")
    assert message.is_displayed() and "No jobs match" in message.text and "zzz" in message.text
    assert not browser.find_element(By.ID, "jobs-empty").is_displayed()
    browser.find_element(By.ID, "job-search").clear()
    browser.find_element(By.ID, "job-search").send_keys(" ")
    Select(browser.find_element(By.ID, "status-filter")).select_by_visible_text("failed")
    wait.until(lambda d: "status “failed”" in d.find_element(By.ID, "jobs-no-match").text)
    assert "No jobs yet" not in browser.find_element(By.ID, "view-jobs").text

    browser.find_element(By.CSS_SELECTOR, '#tabs button[data-view="compare"]').click()
    help_text = wait.until(lambda d: d.find_element(By.ID, "compare-help"))
    assert help_text.is_displayed() and "two or more jobs" in help_text.text
    view = browser.find_element(By.ID, "view-compare")
    assert [s for s in view.find_elements(By.TAG_NAME, "select") if s.is_displayed()] == []
    assert not browser.find_element(By.ID, "compare-diff").is_displayed()
    browser.save_screenshot(str(tmp_path / "compare-empty.png"))

    browser.find_element(By.CSS_SELECTOR, '#tabs button[data-view="submit"]').click()
    browser.find_element(By.ID, "spec-text").send_keys(
        "name: broken\nmodel:\n  - type: Dense\n   units: 3\nepochs: 2\n")
    browser.find_element(By.CSS_SELECTOR, "#submit-form button").click()
    snippet = wait.until(lambda d: d.find_element(By.ID, "submit-parse-error"))
    wait.until(lambda d: snippet.is_displayed())
    lines = snippet.text.split("\n")
    assert len(lines) >= 3 and any(re.match(r"\s*4 \|", line) for line in lines), lines
    assert snippet.value_of_css_property("white-space") == "pre"

    browser.get(sqlite_api.url + f"/jobs/{job_id}")
    wait.until(lambda d: "override" in d.find_element(By.ID, "lr-schedule").text)
    assert "cosine" not in browser.find_element(By.ID, "lr-schedule").text
    assert "step 80" in browser.find_element(By.ID, "lr-schedule").text
    wait.until(lambda d: d.execute_script(
        "const p = jobView.panels.panels.get('lr'); return p && p.plot && p.plot.axes[1]._values"))
    ticks = browser.execute_script("return jobView.panels.panels.get('lr').plot.axes[1]._values")
    exponent = [("e" in t) for t in ticks if t]
    assert len(set(exponent)) == 1, ticks  # one format for every tick
    fits = browser.execute_script(
        "const u = jobView.panels.panels.get('lr').plot, a = u.axes[1];"
        "u.ctx.font = a.font[0];"
        "const widest = Math.max(...a._values.map(v => u.ctx.measureText(v).width))"
        " / devicePixelRatio;"
        "return [widest, a._size, a.label == null]")
    widest, size, unlabeled = fits
    assert size >= widest + 8 and unlabeled  # the title sits above the panel, not beside ticks
    browser.find_element(By.CSS_SELECTOR, '.panel[data-family="lr"]').screenshot(
        str(tmp_path / "lr-panel.png"))
    no_console_errors(browser, expected="status of 4")
