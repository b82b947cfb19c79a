""""Fork from here" and "roll back to here" on a checkpoint, in a real Chromium driven by
real mouse and keyboard events (issue 24's dashboard actions): from a checkpoint marker
and from a row of the checkpoints table, the API's field errors shown on the form, and
roll back refused with its reason on a finished job."""

from __future__ import annotations

from typing import Any

from core import repositories
from core.models import JobStatus
from core.rewind import rewind_job
from core.storage import open_store
from tests.api.browser import requires_chromium
from tests.api.dashboard_pages import no_console_errors, open_job, sign_in
from tests.api.test_commands import running_job
from tests.api.test_lineage import _history
from tests.conftest import ApiHarness

pytestmark = requires_chromium


def _job_with_checkpoints(api: ApiHarness, status: JobStatus | None = None
                          ) -> tuple[str, dict[str, str]]:
    """A job with train_loss at steps 1..30 and checkpoints at 10 (epoch 1) and 20
    (epoch 2), as its worker would have left it; then moved to ``status``."""
    user_id, headers = api.make_user()
    job_id = running_job(api, headers, name="parent")
    _history(api, job_id, user_id)
    if status is not None:
        with api.sessions() as session:
            assert repositories.transition_job(session, job_id=job_id, to_status=status)
            session.commit()
    return job_id, headers


def _marker(browser: Any, wait: Any, step: int) -> Any:
    from selenium.webdriver.common.by import By

    return wait.until(lambda d: d.find_element(
        By.CSS_SELECTOR, f'.panel[data-family="loss"] .marker-checkpoint[data-step="{step}"]'))


def _click(browser: Any, element: Any) -> None:
    """A real mouse click: the pointer moves onto ``element``, presses and releases."""
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(browser).move_to_element(element).click().perform()


def _dialog_open(browser: Any, step: int) -> bool:
    return bool(browser.execute_script(
        "const d = document.getElementById('checkpoint-dialog');"
        "return d.open && d.dataset.step === String(arguments[0])", step))


def test_fork_from_a_checkpoint_marker_lands_on_the_child(
    sqlite_api: ApiHarness, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    parent, headers = _job_with_checkpoints(sqlite_api)
    wait = sign_in(sqlite_api, browser, headers)
    open_job(browser, wait, parent)
    _click(browser, _marker(browser, wait, 10))
    wait.until(lambda d: _dialog_open(d, 10))
    assert "step 10" in browser.find_element(By.ID, "checkpoint-title").text
    _click(browser, browser.find_element(
        By.CSS_SELECTOR, '#checkpoint-dialog [data-checkpoint-action="fork"]'))
    form = browser.find_element(By.ID, "fork-form")
    assert form.is_displayed()
    _click(browser, browser.find_element(By.ID, "fork-lr"))
    browser.find_element(By.ID, "fork-lr").send_keys("0.05")
    browser.find_element(By.ID, "fork-epochs").send_keys("4")
    browser.find_element(By.ID, "fork-overrides").send_keys("name: steeper")
    _click(browser, form.find_element(By.CSS_SELECTOR, "button[type=submit]"))

    wait.until(lambda d: d.execute_script("return jobView.job && jobView.job.id") not in (
        None, parent))
    child = browser.execute_script("return jobView.job.id")
    assert browser.execute_script("return location.pathname") == f"/jobs/{child}"
    assert browser.find_element(By.ID, "job-title").text.startswith("steeper")
    assert not _dialog_open(browser, 10)
    job = sqlite_api.client.get(f"/v1/jobs/{child}", headers=headers).json()
    assert (job["parent_id"], job["fork_step"], job["spec"]["epochs"]) == (parent, 10, 4)
    commands = sqlite_api.client.get(f"/v1/jobs/{child}/commands", headers=headers).json()
    assert [(c["kind"], c["params"]["learning_rate"], c["source"]) for c in commands["data"]
            ] == [("set_lr", 0.05, "fork")]
    lineage = sqlite_api.client.get(f"/v1/jobs/{parent}/lineage", headers=headers).json()
    assert [(c["id"], c["fork_step"]) for c in lineage["children"]] == [(child, 10)]
    # the child's page says where it came from
    wait.until(lambda d: "forked from" in d.find_element(By.ID, "lineage").text)
    assert "at step 10" in browser.find_element(By.ID, "lineage").text
    no_console_errors(browser)


def test_roll_back_from_a_table_row_of_a_paused_job(
    sqlite_api: ApiHarness, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    job_id, headers = _job_with_checkpoints(sqlite_api, JobStatus.PAUSED)
    wait = sign_in(sqlite_api, browser, headers)
    open_job(browser, wait, job_id)
    button = wait.until(lambda d: d.find_element(
        By.CSS_SELECTOR, '#checkpoints tr[data-step="10"] [data-checkpoint-action="rollback"]'))
    assert button.is_enabled()
    _click(browser, button)
    wait.until(lambda d: _dialog_open(d, 10))
    question = browser.find_element(By.ID, "rollback-question")
    assert question.is_displayed() and "back to step 10" in question.text
    # nothing is sent before the confirmation
    assert sqlite_api.client.get(f"/v1/jobs/{job_id}/commands", headers=headers).json()[
        "data"][-1]["kind"] != "rollback"
    _click(browser, browser.find_element(By.ID, "rollback-confirm"))

    wait.until(lambda d: "rolled back to step 10 (applied)" in d.find_element(
        By.ID, "checkpoint-message").text)
    commands = sqlite_api.client.get(f"/v1/jobs/{job_id}/commands", headers=headers).json()
    rollbacks = [c for c in commands["data"] if c["kind"] == "rollback"]
    assert [(c["params"]["step"], c["status"], c["applied_step"]) for c in rollbacks] == [
        (10, "applied", 10)]
    # read in one script: the timeline's rows are redrawn as the page refreshes, so a row
    # found by one call may be gone (stale) by the next
    row_text = wait.until(lambda d: d.execute_script(
        "const row = document.querySelector('#timeline tr[data-command-kind=\"rollback\"]');"
        "return row && row.textContent"))
    assert "rollback" in row_text and "10" in row_text
    # the checkpoint after it is gone from the table, the job is back at step 10
    wait.until(lambda d: [r.get_attribute("data-step") for r in d.find_elements(
        By.CSS_SELECTOR, "#checkpoints tbody tr")] == ["10"])
    assert browser.find_element(By.ID, "job-step").text == "10"
    no_console_errors(browser)


def test_a_running_job_s_rollback_by_keyboard_is_pending_until_its_worker_confirms(
    sqlite_api: ApiHarness, browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    job_id, headers = _job_with_checkpoints(sqlite_api)  # running
    wait = sign_in(sqlite_api, browser, headers)
    open_job(browser, wait, job_id)
    _marker(browser, wait, 10).send_keys(Keys.ENTER)
    wait.until(lambda d: _dialog_open(d, 10))
    browser.switch_to.active_element.send_keys(Keys.TAB)  # fork -> roll back
    assert browser.switch_to.active_element.get_attribute("data-checkpoint-action") == (
        "rollback")
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    assert browser.switch_to.active_element.get_attribute("id") == "rollback-confirm"
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    message = browser.find_element(By.ID, "checkpoint-message")
    wait.until(lambda d: "rollback to step 10 pending" in message.text)
    rollback = [c for c in sqlite_api.client.get(f"/v1/jobs/{job_id}/commands",
                                                 headers=headers).json()["data"]
                if c["kind"] == "rollback"]
    assert [(c["params"]["step"], c["status"]) for c in rollback] == [(10, "pending")]
    wait.until(lambda d: d.find_element(By.CSS_SELECTOR,
                                        '#timeline tr[data-command-kind="rollback"]'))

    with sqlite_api.sessions() as session:  # what its worker does at the next boundary
        rewind_job(session, open_store(sqlite_api.settings.storage_url), job_id=job_id,
                   to_step=10, command_id=rollback[0]["command_id"])
    wait.until(lambda d: "rolled back to step 10 (applied)" in message.text)
    wait.until(lambda d: [r.get_attribute("data-step") for r in d.find_elements(
        By.CSS_SELECTOR, "#checkpoints tbody tr")] == ["10"])
    # the points after step 10 are drawn again, as the abandoned branch
    wait.until(lambda d: "train_loss · rolled back (branch 1)" in d.execute_script(
        "const p = jobView.panels.panels.get('loss');"
        "return p && p.plot ? p.plot.series.map(s => s.label) : []"))
    no_console_errors(browser)


def test_a_bad_override_shows_the_field_the_api_named_and_changes_nothing(
    sqlite_api: ApiHarness, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    parent, headers = _job_with_checkpoints(sqlite_api, JobStatus.PAUSED)
    wait = sign_in(sqlite_api, browser, headers)
    open_job(browser, wait, parent)
    _click(browser, wait.until(lambda d: d.find_element(
        By.CSS_SELECTOR, '#checkpoints tr[data-step="20"] [data-checkpoint-action="fork"]')))
    wait.until(lambda d: _dialog_open(d, 20))
    epochs = browser.find_element(By.ID, "fork-epochs")
    epochs.send_keys("2")  # the checkpoint at step 20 has done 2 epochs already
    _click(browser, browser.find_element(By.CSS_SELECTOR, "#fork-form button[type=submit]"))
    message = browser.find_element(By.ID, "checkpoint-message")
    wait.until(lambda d: "overrides.epochs" in message.text)
    assert "2 epochs" in message.text
    assert epochs.get_attribute("aria-invalid") == "true"
    assert epochs.get_attribute("value") == "2"  # what was typed stays to be corrected

    # a field of the free box: the box is marked, the epochs box no longer
    epochs.clear()
    box = browser.find_element(By.ID, "fork-overrides")
    box.send_keys("model: []")
    _click(browser, browser.find_element(By.CSS_SELECTOR, "#fork-form button[type=submit]"))
    wait.until(lambda d: "overrides.model" in message.text)
    assert box.get_attribute("aria-invalid") == "true"
    assert epochs.get_attribute("aria-invalid") is None
    # a box that is not YAML is named before anything is sent
    box.clear()
    box.send_keys("optimizer: [1, 2")
    _click(browser, browser.find_element(By.CSS_SELECTOR, "#fork-form button[type=submit]"))
    wait.until(lambda d: message.text.startswith("overrides: not YAML or JSON"))
    assert _dialog_open(browser, 20)
    assert browser.execute_script("return location.pathname") == f"/jobs/{parent}"
    lineage = sqlite_api.client.get(f"/v1/jobs/{parent}/lineage", headers=headers).json()
    assert lineage["children"] == []
    no_console_errors(browser, expected=f"/v1/jobs/{parent}/fork")


def test_roll_back_is_refused_with_its_reason_on_a_finished_job(
    sqlite_api: ApiHarness, browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    job_id, headers = _job_with_checkpoints(sqlite_api, JobStatus.SUCCEEDED)
    wait = sign_in(sqlite_api, browser, headers)
    open_job(browser, wait, job_id)
    table_button = wait.until(lambda d: d.find_element(
        By.CSS_SELECTOR, '#checkpoints tr[data-step="10"] [data-checkpoint-action="rollback"]'))
    assert not table_button.is_enabled()
    assert "paused or running" in table_button.get_attribute("title")

    # the keyboard reaches the marker's actions too
    _marker(browser, wait, 20).send_keys(Keys.ENTER)
    wait.until(lambda d: _dialog_open(d, 20))
    dialog_button = browser.find_element(
        By.CSS_SELECTOR, '#checkpoint-dialog [data-checkpoint-action="rollback"]')
    assert not dialog_button.is_enabled()
    reason = browser.find_element(By.ID, "rollback-refusal")
    assert reason.is_displayed() and "this one is succeeded" in reason.text
    fork = browser.find_element(
        By.CSS_SELECTOR, '#checkpoint-dialog [data-checkpoint-action="fork"]')
    assert fork.is_enabled()
    assert browser.switch_to.active_element == fork  # focus lands where it can act
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    assert browser.find_element(By.ID, "fork-form").is_displayed()
    browser.switch_to.active_element.send_keys(Keys.ESCAPE)
    wait.until(lambda d: not _dialog_open(d, 20))
    commands = sqlite_api.client.get(f"/v1/jobs/{job_id}/commands", headers=headers).json()
    assert all(c["kind"] != "rollback" for c in commands["data"])
    no_console_errors(browser)
