"""What the dashboard's browser tests share: signing in, opening a job, seeding what a
worker would have recorded, and reading what the page drew."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import update

from core import repositories
from core.models import JobStatus, JobStatusEvent, utcnow
from tests.conftest import ApiHarness


def sign_in(api: ApiHarness, browser: Any, headers: dict[str, str], path: str = "/") -> Any:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.set_window_size(1300, 1800)
    browser.get(api.url + path)
    browser.find_element(By.ID, "token-input").send_keys(headers["Authorization"].split()[1])
    browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
    # the page redraws its tables as it refreshes: an element a condition found may be
    # replaced before it is read, so the condition is asked again (as for a missing one)
    return WebDriverWait(browser, 20, ignored_exceptions=(StaleElementReferenceException,))


def open_job(browser: Any, wait: Any, job_id: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    wait.until(ec.element_to_be_clickable(
        (By.CSS_SELECTOR, f'#jobs tr[data-job-id="{job_id}"]')
    )).click()
    wait.until(lambda d: d.execute_script("return jobView.job && jobView.job.id") == job_id)


def panels_ready(browser: Any, families: int) -> bool:
    return bool(browser.execute_script(
        "const p = jobView.panels && [...jobView.panels.panels.values()];"
        "return p && p.length === arguments[0] && p.every(x => x.plot);", families))


def x_ranges(browser: Any, selector: str = "jobView.panels.panels") -> list[list[float]]:
    return list(browser.execute_script(
        f"return [...{selector}.values()].map(p => [p.plot.scales.x.min, p.plot.scales.x.max])"))


def drag(browser: Any, element: Any, start: int, distance: int) -> None:
    """A real mouse drag across ``element`` from ``start`` px left of its centre."""
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(browser).move_to_element_with_offset(element, start, 0).click_and_hold() \
        .move_by_offset(distance // 2, 0).move_by_offset(distance - distance // 2, 0) \
        .release().perform()


def no_console_errors(browser: Any, expected: str | None = None) -> None:
    """No script errors; ``expected`` names a failed request the test made on purpose."""
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"
              and not (expected and e["source"] == "network" and expected in e["message"])]
    assert errors == []


def seed_points(api: ApiHarness, job_id: str, points: list[tuple[int, int, str, float]],
                times: dict[int, datetime] | None = None) -> None:
    """``(step, epoch, name, value)`` as the worker's batched copy; ``times`` by step."""
    with api.sessions() as session:
        repositories.add_metric_points(session, job_id=job_id, points=[
            repositories.MetricPointIn(step=step, epoch=epoch, name=name, value=value,
                                       time=(times or {}).get(step))
            for step, epoch, name, value in points
        ])
        session.commit()


def set_history(api: ApiHarness, job_id: str, statuses: list[tuple[str, float]]) -> None:
    """Walk the job through ``(status, seconds ago)``, each status change dated then."""
    now = utcnow()
    with api.sessions() as session:
        for status, _ in statuses:
            assert repositories.transition_job(session, job_id=job_id,
                                               to_status=JobStatus(status))
        session.flush()
        events = repositories.list_status_events(session, job_id=job_id)[-len(statuses):]
        for event, (_, ago) in zip(events, statuses, strict=True):
            session.execute(update(JobStatusEvent).where(JobStatusEvent.id == event.id)
                            .values(created_at=now - timedelta(seconds=ago)))
        session.commit()
