"""issue 15, items 1, 2, 4, 5, 6: the real `rudder` entry point against the test server."""

from __future__ import annotations

import io
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from core import repositories
from core.models import JobStatus
from rudder.commands import UsageError, resolve
from tests.cli.conftest import ROOT, RUDDER, Cli, cli_env


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


# ------------------------------------------------------------------ 1. watch


def test_watch_skips_an_old_pause_and_exits_with_the_final_status(cli: Cli) -> None:
    job_id = cli.submit()
    for status in (JobStatus.RUNNING, JobStatus.PAUSED, JobStatus.QUEUED, JobStatus.RUNNING):
        cli.set_status(job_id, status)  # the job's history: paused once, resumed since
    cli.channel(lambda ch: ch.publish_metric(job_id, step=40, epoch=0,
                                             values={"val_accuracy": 0.9, "lr": 0.001}))
    watcher = cli.popen("watch", job_id)
    time.sleep(3)  # long enough to have replayed the history and caught up
    assert watcher.poll() is None, "watch stopped at the old pause"
    cli.set_status(job_id, JobStatus.SUCCEEDED)
    out, err = watcher.communicate(timeout=30)
    assert watcher.returncode == 0, err
    assert "val after epoch 1/10: val_accuracy=0.9" in out
    assert out.strip().splitlines()[-1] == "status: succeeded"


def test_watch_of_a_finished_or_paused_job_reports_its_state_now(cli: Cli) -> None:
    finished = cli.submit()
    for status in (JobStatus.RUNNING, JobStatus.PAUSED, JobStatus.RUNNING, JobStatus.FAILED):
        cli.set_status(finished, status)
    result = cli("watch", finished)
    assert result.returncode == 1 and "status: failed" in result.stdout
    paused = cli.submit()
    for status in (JobStatus.RUNNING, JobStatus.PAUSED):
        cli.set_status(paused, status)
    result = cli("watch", paused, timeout=30)
    assert result.returncode == 4, result.stdout + result.stderr
    assert f"rudder resume {paused[:8]}" in result.stdout


# ------------------------------------------------------------------ 2. lr --wait


def test_lr_wait_gives_up_after_its_seconds(cli: Cli) -> None:
    job_id = cli.submit()
    cli.set_status(job_id, JobStatus.RUNNING)
    started = time.monotonic()
    result = cli("lr", job_id, "0.0005", "--wait", "1.5")
    assert time.monotonic() - started < 15
    assert result.returncode == 1 and "still pending after 1.5 s" in result.stderr


def test_lr_wait_prints_the_rejection_and_exits_non_zero(cli: Cli) -> None:
    job_id = cli.submit()
    cli.set_status(job_id, JobStatus.RUNNING)
    waiting = cli.popen("lr", job_id, "0.0005", "--wait", "30")
    change_id = None
    deadline = time.monotonic() + 20
    while change_id is None and time.monotonic() < deadline:
        with cli.api.sessions() as session:
            changes = repositories.list_lr_changes(session, job_id=job_id)
            if changes:
                change_id = changes[0].id
                assert repositories.mark_lr_change_rejected(
                    session, change_id=change_id,
                    reason="cannot scale a schedule whose current learning rate is 0.0")
                session.commit()
        time.sleep(0.2)
    out, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 1, out + err
    assert "rejected: cannot scale a schedule whose current learning rate is 0.0" in err


def test_lr_shows_the_scale_preview(cli: Cli) -> None:
    job_id = cli.submit()
    cli.set_status(job_id, JobStatus.RUNNING)
    with cli.api.sessions() as session:
        repositories.update_job_progress(session, job_id=job_id, step=25, epoch=0)
        session.commit()
    result = cli("lr", job_id[:8], "0.002")
    assert result.returncode == 0, result.stderr
    assert "scale: the spec's schedule x4 from here on\n  peak 0.004 at step 50" in result.stdout
    assert "in warmup (step 25 of 50), so the peak is scaled too" in result.stdout
    assert max(map(len, result.stdout.splitlines())) <= 80, "lines must fit 80 columns"


# ------------------------------------------------------------------ 4. one-line errors


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "fast"])
def test_bad_learning_rates_are_one_line_errors(cli: Cli, value: str) -> None:
    job_id = cli.submit()
    line = _one_error_line(cli("lr", job_id, value))
    assert "learning rate must be" in line


def test_bad_download_and_unreachable_api_are_one_line_errors(cli: Cli) -> None:
    job_id = cli.submit()
    assert "--download takes a step number or 'latest'" in _one_error_line(
        cli("checkpoints", job_id, "--download", "foo"))
    assert "has no checkpoints yet" in _one_error_line(
        cli("checkpoints", job_id, "--download", "latest"))
    down = cli("ls", "--url", "http://127.0.0.1:9")
    assert "cannot reach the API" in _one_error_line(down)


def test_ls_into_a_closed_pipe_exits_quietly(cli: Cli) -> None:
    for _ in range(3):
        cli.submit()
    read_end, write_end = os.pipe()
    os.close(read_end)  # `rudder ls | head` after head has gone
    try:
        result = subprocess.run([*RUDDER, "ls"], env=cli.env, cwd=ROOT, stdout=write_end,
                                stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert result.returncode != 0 and result.stderr == ""


def test_token_create_outside_the_up_folder_creates_nothing(tmp_path: Path) -> None:
    result = subprocess.run([*RUDDER, "token", "create"], env=cli_env(), cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert "run this in the folder where you ran `rudder up`" in _one_error_line(result)
    assert list(tmp_path.iterdir()) == []


def test_token_create_with_an_expiry_then_ls_and_revoke(cli: Cli, tmp_path: Path) -> None:
    """Issue 14: tokens can expire, and a user lists and revokes their own."""
    env = cli.env | {"RUDDER_DATABASE_URL": cli.api.settings.database_url,
                     "RUDDER_SECRET_KEY": cli.api.settings.secret_key.get_secret_value()}
    bad = subprocess.run([*RUDDER, "token", "create", "--expires-in", "soon"], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert "--expires-in: 'soon' is not a duration" in _one_error_line(bad)
    made = subprocess.run([*RUDDER, "token", "create", "--name", "cli-tokens", "--label",
                           "ci", "--expires-in", "12h"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    as_new = cli.env | {"RUDDER_TOKEN": token}
    listed = subprocess.run([*RUDDER, "token", "ls"], env=as_new, cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.lstrip().startswith("*"))
    assert token[:10] in row and "ci" in row and "active" in row and "never" not in row
    revoked = subprocess.run([*RUDDER, "token", "revoke", token[:10]], env=as_new, cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert revoked.returncode == 0 and revoked.stdout.startswith("revoked token "), revoked
    after = subprocess.run([*RUDDER, "ls"], env=as_new, cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
    assert "invalid, revoked or expired token (401 unauthorized)" in _one_error_line(after)
    # the user's other tokens are untouched
    assert "revoked" not in cli("token", "ls").stdout


# ------------------------------------------------------------------ 5. id prefixes


def test_unique_prefixes_work_and_short_or_unknown_ones_say_why(cli: Cli) -> None:
    job_id = cli.submit(name="prefix-me")
    shown = cli("show", job_id[:8])
    assert shown.returncode == 0 and f'"id": "{job_id}"' in shown.stdout
    assert "too short" in _one_error_line(cli("show", job_id[:4]))
    assert "no job id starts with" in _one_error_line(cli("pause", "ffffffffff"))


def test_an_ambiguous_prefix_names_the_candidates() -> None:
    ids = ["88a14e78-0000", "88a14e78-1111", "77aa0000-2222"]
    assert resolve("77aa00", lambda: ids) == "77aa0000-2222"
    with pytest.raises(UsageError, match="ambiguous: it matches 88a14e78-0000, 88a14e78-1111"):
        resolve("88a14e", lambda: ids)


# ------------------------------------------------------------------ 6. new commands


def test_datasets_upload_ls_show_and_rm(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "tiny.npz"
    buffer = io.BytesIO()
    np.savez(buffer, data=np.random.rand(20, 4).astype("float32"),
             label=np.arange(20) % 3)
    path.write_bytes(buffer.getvalue())
    uploaded = cli("datasets", "upload", str(path), "--name", "tiny", "-q")
    assert uploaded.returncode == 0, uploaded.stderr
    dataset_id = uploaded.stdout.strip()
    listed = cli("datasets", "ls")
    assert dataset_id[:8] in listed.stdout and "tiny" in listed.stdout
    shown = cli("datasets", "show", dataset_id[:8])
    assert shown.returncode == 0 and '"num_rows": 20' in shown.stdout
    openapi = cli.api.client.get("/openapi.json").json()["paths"]
    if "delete" not in openapi.get("/v1/datasets/{dataset_id}", {}):
        pytest.skip("DELETE /v1/datasets/{id} comes with the API side of issue 15")
    removed = cli("datasets", "rm", dataset_id[:8])
    assert removed.returncode == 0, removed.stderr
    assert dataset_id[:8] not in cli("datasets", "ls").stdout


def test_logs_prints_log_and_status_events_and_stops_when_caught_up(cli: Cli) -> None:
    job_id = cli.submit()
    cli.set_status(job_id, JobStatus.RUNNING)
    cli.channel(lambda ch: ch.publish_log(job_id, level="warning", message="slow disk"))
    result = cli("logs", job_id[:10], timeout=30)
    assert result.returncode == 0, result.stderr
    # each line after its time (YYYY-MM-DD HH:MM:SS): issue 26
    assert [line[20:] for line in result.stdout.splitlines()] == [
        "status: running", "warning: slow disk"]


def test_delete_refuses_a_running_job_and_removes_a_finished_one(cli: Cli) -> None:
    openapi = cli.api.client.get("/openapi.json").json()["paths"]
    if "delete" not in openapi.get("/v1/jobs/{job_id}", {}):
        pytest.skip("DELETE /v1/jobs/{id} comes with the API side of issue 15")
    job_id = cli.submit()
    cli.set_status(job_id, JobStatus.RUNNING)
    assert "409" in _one_error_line(cli("delete", job_id))
    cli.set_status(job_id, JobStatus.SUCCEEDED)
    assert cli("delete", job_id).returncode == 0
    assert cli.api.client.get(f"/v1/jobs/{job_id}", headers=cli.headers).status_code == 404


def test_version_and_help_for_every_argument_with_an_example() -> None:
    import argparse

    from rudder import __version__
    from rudder.cli import build_parser

    version = subprocess.run([*RUDDER, "--version"], env=cli_env(), capture_output=True,
                             text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.strip() == f"rudder {__version__}"

    def commands(parser: argparse.ArgumentParser, path: str):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            yield path, parser
        for sub in subs:
            for name, child in sub.choices.items():
                yield from commands(child, f"{path} {name}")

    found = list(commands(build_parser(), "rudder"))
    # 19 + model upload|ls|show|rm and export (issue 12) + set, schedule, freeze, unfreeze,
    # eval, checkpoint, rules, rollback, fork, hyperparameters and lineage (issue 24) + usage
    # (issue 25.8)
    assert len(found) == 36
    for path, parser in found:
        assert parser.epilog and "example:\n  rudder" in parser.epilog, path
        for action in parser._actions:
            assert action.help, f"{path}: {action.dest} has no help"
            if action.choices:
                assert all(str(choice) in action.format_usage() or str(choice) in
                           parser.format_help() for choice in action.choices), path


# ------------------------------------------------------------------ the tour's commands


def test_pause_waits_for_the_worker_so_the_next_command_finds_it_done(cli: Cli) -> None:
    """Like `rudder cancel J && rudder delete J` in the tour: the second command must not
    find the job still running."""
    job_id = cli.submit()
    cli.set_status(job_id, JobStatus.RUNNING)
    pauser = cli.popen("pause", job_id[:8], "--wait", "30")
    time.sleep(2)
    still_waiting = pauser.poll() is None
    cli.set_status(job_id, JobStatus.PAUSED)  # the worker carries it out
    out, err = pauser.communicate(timeout=30)
    assert still_waiting, "pause returned while the worker had not acted"
    assert pauser.returncode == 0, err
    assert out.strip() == f"{job_id}: paused"


def test_pause_that_the_worker_does_not_carry_out_in_time_says_so(cli: Cli) -> None:
    job_id = cli.submit()
    cli.set_status(job_id, JobStatus.RUNNING)
    result = cli("pause", job_id, "--wait", "1")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (f"{job_id}: pause requested, still running (the worker "
                                     "acts at its next step boundary)")


def test_ls_on_a_narrow_terminal_shortens_ids_not_names_and_a_pipe_gets_whole_ids(
        cli: Cli) -> None:
    job_id = cli.submit(name="a-rather-long-job-name")
    narrow = subprocess.run([*RUDDER, "ls"], env={**cli.env, "COLUMNS": "70"}, cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    row = narrow.stdout.splitlines()[1]
    assert max(map(len, narrow.stdout.splitlines())) <= 70, narrow.stdout
    assert "a-rather-long-job-name" in row and "queued" in row
    assert row.split()[0] in job_id and len(row.split()[0]) >= 8
    piped = {k: v for k, v in cli.env.items() if k != "COLUMNS"}
    whole = subprocess.run([*RUDDER, "ls"], env=piped, cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
    assert whole.stdout.splitlines()[1].split()[:3] == [job_id, "a-rather-long-job-name",
                                                        "queued"]
