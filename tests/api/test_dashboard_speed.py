"""How fast the job page draws a long history and keeps up with live metrics, measured
in real Chromium with the Performance API (figures printed; run with -s to see them)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from core import repositories
from core.channel import Channel
from core.models import JobStatus
from tests.api.browser import requires_chromium
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness

pytestmark = requires_chromium

METRICS = ("train_loss", "val_loss", "train_accuracy", "val_accuracy", "lr")
STEPS = 20_000

# Wraps the page's per-frame flush to note when the whole history first reached the
# screen, and counts animation frames and long tasks on demand.
INSTRUMENT = """
window.__perf = {drawnAt: null, frames: 0, longTasks: 0, counting: false};
const flush = MetricPanels.prototype.flush;
MetricPanels.prototype.flush = function () {
  flush.call(this);
  if (window.__perf.drawnAt === null && this.store.count() >= %d
      && this.panels.size > 0) window.__perf.drawnAt = performance.now();
};
new PerformanceObserver((list) => {
  if (window.__perf.counting) window.__perf.longTasks += list.getEntries().length;
}).observe({type: "longtask", buffered: false});
"""

COUNT_FRAMES = """
const done = arguments[arguments.length - 1];
const seconds = arguments[0];
window.__perf.counting = true;
const start = performance.now();
let frames = 0;
function tick(now) {
  frames++;
  if (now - start < seconds * 1000) requestAnimationFrame(tick);
  else { window.__perf.counting = false;
         done({fps: frames / ((now - start) / 1000), longTasks: window.__perf.longTasks}); }
}
requestAnimationFrame(tick);
"""


def test_job_page_with_5x20000_points_renders_in_a_second_and_stays_smooth_live(
    sqlite_api: ApiHarness, browser: Any, redis_url: str, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    _, headers = sqlite_api.make_user()
    job_id = sqlite_api.client.post("/v1/jobs", json=digits_spec(name="long-run"),
                                    headers=headers).json()["id"]
    with sqlite_api.sessions() as session:
        repositories.add_metric_points(session, job_id=job_id, points=[
            repositories.MetricPointIn(step=s, epoch=(s - 1) // 2000, name=name,
                                       value=(1.0 / s if "loss" in name or name == "lr"
                                              else 1 - 1.0 / s))
            for name in METRICS for s in range(1, STEPS + 1)
        ])
        repositories.transition_job(session, job_id=job_id, to_status=JobStatus.RUNNING)
        session.commit()

    browser.set_window_size(1300, 1400)
    browser.get(sqlite_api.url + "/")
    browser.find_element(By.ID, "token-input").send_keys(headers["Authorization"].split()[1])
    browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
    wait = WebDriverWait(browser, 30)
    row = wait.until(ec.element_to_be_clickable(
        (By.CSS_SELECTOR, f'#jobs tr[data-job-id="{job_id}"]')))
    # thinned history: the API keeps at most 2000 points per metric for display
    browser.execute_script(INSTRUMENT % (5 * 1000))
    started = browser.execute_script("return performance.now()")
    row.click()
    wait.until(lambda d: d.execute_script("return window.__perf.drawnAt") is not None)
    render_ms = browser.execute_script("return window.__perf.drawnAt") - started
    assert browser.find_element(By.ID, "charts").get_attribute("data-total") == str(
        len(METRICS) * STEPS)
    wait.until(ec.text_to_be_present_in_element((By.ID, "stream-state"), "live"))

    channel = Channel.from_url(redis_url)
    stop = threading.Event()

    def publish() -> None:  # 10 metric events a second, as a fast trainer would
        step = STEPS
        while not stop.is_set():
            step += 1
            channel.publish_metric(job_id, step=step, epoch=10, values={
                name: 0.5 for name in METRICS})
            time.sleep(0.1)

    publisher = threading.Thread(target=publish, daemon=True)
    publisher.start()
    try:
        browser.set_script_timeout(30)
        live = browser.execute_async_script(COUNT_FRAMES, 5)
    finally:
        stop.set()
        publisher.join(timeout=5)
        channel.close()
    last_step = int(browser.find_element(By.ID, "job-step").text)
    browser.save_screenshot(str(tmp_path / "long-history-live.png"))
    print(f"\njob page, {len(METRICS)} x {STEPS} points: drawn {render_ms:.0f} ms after the "
          f"click; live at 10 events/s: {live['fps']:.1f} fps, {live['longTasks']} long tasks")
    assert last_step > STEPS + 30  # the live events were drawn while we counted
    assert render_ms <= 1000
    assert live["fps"] >= 30
