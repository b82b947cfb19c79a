"""issue 15, items 8, 10, 11, 12, 13: watch's rendering, the Makefile, `rudder up`'s port
check and ordered stop, the compose file."""

from __future__ import annotations

import io
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from rudder.client import ServerEvent
from rudder.embedded import Supervisor
from rudder.watch import watch
from tests.cli.conftest import ROOT, RUDDER, cli_env

# ------------------------------------------------------------------ 8. watch fits the width


class _ScriptedClient:
    def __init__(self, events: list[ServerEvent]) -> None:
        self._events = events

    def events(self, job_id: str, keepalives: bool = False) -> Any:
        return iter(self._events)

    def get_job(self, job_id: str) -> dict[str, Any]:
        return {"id": job_id, "status": "succeeded"}


def test_watch_in_an_80_column_terminal_fits_and_names_the_val_epoch() -> None:
    values = {f"train_metric_{i}": 0.123456 for i in range(12)}
    events = [ServerEvent("1", "status", {"status": "running"})]
    for step in range(10, 200, 10):
        events.append(ServerEvent(str(step), "metric",
                                  {"step": step, "epoch": step // 50, "values": values}))
        if step % 50 == 0:
            events.append(ServerEvent(f"{step}v", "metric", {
                "step": step, "epoch": step // 50 - 1,
                "values": {"val_accuracy": 0.5 + step / 1000, "val_loss": 0.3}}))
    events.append(ServerEvent("z", "status", {"status": "succeeded"}))
    screen = io.StringIO()
    console = Console(file=screen, width=80, force_terminal=True, color_system=None,
                      force_interactive=True)
    code = watch(_ScriptedClient(events), {"id": "3f0c1a2b" + "0" * 28, "status": "running",
                                           "spec": {"epochs": 4}}, console)
    assert code == 0
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "\n", screen.getvalue())  # cursor moves
    lines = [line for line in text.replace("\r", "\n").splitlines() if line.strip()]
    assert max(len(line) for line in lines) <= 80
    assert "val after epoch 3/4: val_accuracy=0.65 val_loss=0.3" in lines
    assert "status: succeeded" in lines


# ------------------------------------------------------------------ 10. make up vs make test


def test_make_up_installs_runtime_deps_only_and_make_test_the_dev_extras() -> None:
    def dry_run(target: str) -> str:
        return subprocess.run(["make", "-n", "-B", target, "PY=python3"], cwd=ROOT,
                              capture_output=True, text=True, timeout=60, check=True).stdout

    up, test = dry_run("up"), dry_run("test")
    # the runtime (with the `dist` extra: kvstore='dist_sync' needs torch's Gloo), no dev tools
    assert "pip install -q -e '.[dist]'\n" in up and "dev]" not in up
    assert "pip install -q -e '.[dist,dev]'" in test


# ------------------------------------------------------------------ 11. busy port


def test_rudder_up_on_a_busy_port_says_so_before_starting_anything(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run([*RUDDER, "up", "--home", str(tmp_path / "home"),
                                 "--port", str(port)], env=cli_env(), cwd=ROOT,
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip() == \
        f"error: port {port} is in use (another Rudder?); use --port"
    assert "Rudder is up" not in result.stdout and not (tmp_path / "home").exists()


# ------------------------------------------------------------------ 12. ordered stop

CHILD = """
import signal, sys, time
log = sys.argv[1]
def stop(*_):
    with open(log, "a") as f: f.write(f"{sys.argv[2]} term {time.monotonic()}\\n")
    time.sleep(float(sys.argv[3]))
    with open(log, "a") as f: f.write(f"{sys.argv[2]} exit {time.monotonic()}\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
open(log, "a").close()
while True: time.sleep(0.05)
"""


def test_stop_is_in_order_worker_then_api_then_redis(tmp_path: Path) -> None:
    log = tmp_path / "order.log"
    supervisor = Supervisor()
    for name, linger in (("redis", 0.1), ("api", 0.1), ("worker", 1.0)):
        supervisor.start(name, [sys.executable, "-c", CHILD, str(log), name, str(linger)],
                         env={})
    time.sleep(1.0)  # the children install their handlers
    supervisor.stop_all()
    entries = [line.split() for line in log.read_text().splitlines()]
    assert [(name, what) for name, what, _ in entries] == [
        ("worker", "term"), ("worker", "exit"), ("api", "term"), ("api", "exit"),
        ("redis", "term"), ("redis", "exit")]
    # Redis got its SIGTERM only after the checkpointing worker had exited.
    assert float(entries[4][2]) >= float(entries[1][2])


# ------------------------------------------------------------------ 13. compose


def test_compose_runs_without_a_gpu_and_pins_every_image() -> None:
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    services = compose["services"]
    default = {name: s for name, s in services.items() if not s.get("profiles")}
    assert not any("deploy" in s for s in default.values()), "a default service needs a GPU"
    assert "-Q" in default["worker"]["command"] and "cpu" in default["worker"]["command"]
    assert services["gpu-worker"]["profiles"] == ["gpu"]
    assert services["gpu-worker"]["deploy"]["resources"]["reservations"]["devices"]
    for name, service in services.items():
        image = service["image"]
        tag = image.rsplit(":", 1)[1] if ":" in image else ""
        assert tag and tag != "latest", f"{name}: image {image} is not pinned"
    assert services["api"]["ports"] == ["${RUDDER_API_BIND:-127.0.0.1}:8000:8000"]
    for dockerfile in (ROOT / "docker").glob("*.Dockerfile"):
        base = re.search(r"^FROM (\S+)", dockerfile.read_text(), re.M)
        assert base and re.search(r":\d+\.\d+\.\d+", base.group(1)), dockerfile.name
