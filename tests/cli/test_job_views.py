"""Issue 26 item 16: what `rudder lr`, `logs`, `ls` and `datasets ls` say is what is so."""

from __future__ import annotations

import io
import re
import time
import uuid
from datetime import datetime
from pathlib import Path

import numpy as np

from core.channel import Channel
from core.models import JobStatus
from tests.cli.conftest import Cli


def test_lr_on_a_paused_job_says_it_applies_on_resume(cli: Cli) -> None:
    job_id = cli.submit()
    for status in (JobStatus.RUNNING, JobStatus.PAUSED):
        cli.set_status(job_id, status)
    started = time.monotonic()
    result = cli("lr", job_id[:8], "0.0005", "--wait", "5")
    assert time.monotonic() - started < 4.5  # no waiting on a worker that is not there
    assert result.returncode == 1
    assert "still pending" not in result.stderr
    assert (f"{job_id[:8]} is paused: the change applies at the first step after it is "
            f"resumed (`rudder resume {job_id[:8]}`)") in result.stderr
    unwaited = cli("lr", job_id[:8], "0.0004")
    assert unwaited.returncode == 0 and f"{job_id[:8]} is paused" in unwaited.stdout


def test_logs_show_each_line_with_the_time_it_happened(cli: Cli) -> None:
    job_id = cli.submit()
    cli.set_status(job_id, JobStatus.RUNNING)
    cli.channel(lambda ch: ch.publish_log(job_id, level="info",
                                          message="checkpoint at step 200 (0.0001) in 0.1s"))
    published = datetime.now()
    time.sleep(1.2)  # a line printed with the time it is read would be a second later
    lines = cli("logs", job_id[:8], timeout=30).stdout.splitlines()
    assert [line[20:] for line in lines] == [
        "status: running", "info: checkpoint at step 200 (0.0001) in 0.1s"]
    for line in lines:
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", line[:20]), line
        at = datetime.strptime(line[:19], "%Y-%m-%d %H:%M:%S")
        assert abs((at - published).total_seconds()) < 1.1, (line, published)


def test_pause_and_resume_name_the_same_person(cli: Cli) -> None:
    name = f"carol-{uuid.uuid4().hex[:6]}"
    _, headers = cli.api.make_user(name)
    job_id = cli.api.client.post("/v1/jobs", json=_spec(), headers=headers).json()["id"]
    cli.set_status(job_id, JobStatus.RUNNING)
    paused = cli.api.client.post(f"/v1/jobs/{job_id}/pause", headers=headers)
    assert paused.json()["pending"] is True, paused.text
    channel = Channel.from_url(cli.api.settings.redis_url or "")
    try:
        [sent] = channel.read_commands(job_id)
    finally:
        channel.close()
    # what the worker records as the job's status reason when it pauses
    assert sent.command.type == "pause" and sent.command.reason == f"paused by {name}"
    cli.set_status(job_id, JobStatus.PAUSED)
    cli.api.client.post(f"/v1/jobs/{job_id}/resume", headers=headers)
    job = cli.api.client.get(f"/v1/jobs/{job_id}", headers=headers).json()
    assert job["status_reason"] == f"resumed by {name}"


def test_ls_shows_the_lr_in_effect_not_the_optimizers_base(cli: Cli) -> None:
    warming = cli.submit(name="warming-up")  # cosine with 50 warmup steps from 0, to 0.001
    constant = cli.submit(name="constant", lr_scheduler=None)
    lines = cli("ls").stdout.splitlines()[1:]
    lr = {job: next(line for line in lines if line.startswith(job[:8])).split()[-1]
          for job in (warming, constant)}
    assert lr == {warming: "0", constant: "0.001"}, lines


def test_datasets_ls_names_regression_labels_and_fits_100_columns(cli: Cli,
                                                                  tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    sets = {"sensor-readings-regression-2026-11": rng.random(30).astype("float32"),
            "digit-classes": np.arange(30) % 3}
    for name, label in sets.items():
        buffer = io.BytesIO()
        np.savez(buffer, data=rng.random((30, 4)).astype("float32"), label=label)
        path = tmp_path / f"{name}.npz"
        path.write_bytes(buffer.getvalue())
        uploaded = cli("datasets", "upload", str(path), "--name", name, "-q")
        assert uploaded.returncode == 0, uploaded.stderr
    listed = cli("datasets", "ls")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert all(len(line) <= 100 for line in lines), lines
    assert "None" not in listed.stdout
    row = {name: next(line for line in lines if name in line) for name in sets}
    assert "regression" in row["sensor-readings-regression-2026-11"].split()
    assert row["digit-classes"].split()[-3] == "3"  # CLASSES, before SIZE's "n KiB"


def _spec() -> dict[str, object]:
    from tests.api.specs import digits_spec

    return digits_spec()


def test_watch_leaves_the_workers_info_lines_to_logs(cli: Cli) -> None:
    job_id = cli.submit()
    cli.set_status(job_id, JobStatus.RUNNING)
    for level, message in (("info", "checkpoint at step 10 (periodic) in 0.1s"),
                           ("warning", "slow disk")):
        cli.channel(lambda ch, lv=level, m=message: ch.publish_log(job_id, level=lv,
                                                                   message=m))
    watcher = cli.popen("watch", job_id)
    time.sleep(3)
    cli.set_status(job_id, JobStatus.SUCCEEDED)
    out, err = watcher.communicate(timeout=30)
    assert watcher.returncode == 0, err
    assert "warning: slow disk" in out and "checkpoint at step 10" not in out
