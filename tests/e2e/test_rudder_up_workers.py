"""`rudder up --workers 2`: two worker processes on one machine, enough for a job that
asks for two (issue 23)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rudder.client import Client
from tests.e2e.test_distributed import _spec
from tests.e2e.test_embedded_supervisor import Up
from tests.services import wait_until

pytestmark = pytest.mark.slow


def test_rudder_up_with_two_workers_trains_a_two_worker_job(tmp_path: Path) -> None:
    home = tmp_path / ".rudder"
    up = Up(home, "--workers", "2")
    try:
        logs = up.wait_line("logs:", 30)
        assert "worker-1.log" in logs and "worker-2.log" in logs
        with Client(up.url, up.token, timeout=30) as client:
            job_id = client.submit(_spec(2, epochs=1))["id"]
            wait_until(lambda: client.get_job(job_id)["status"] in ("succeeded", "failed"),
                       120, interval=0.2, what="the 2-worker job to end")
            job = client.get_job(job_id)
            assert job["status"] == "succeeded", job
        assert "joins generation" in (home / "worker-1.log").read_text() + \
            (home / "worker-2.log").read_text()
    finally:
        assert up.stop() == 0
