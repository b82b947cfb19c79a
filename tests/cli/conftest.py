"""The real ``rudder`` entry point against the test server (tests/conftest.py's ``api``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from core.channel import Channel
from core.models import JobStatus
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness

ROOT = Path(__file__).resolve().parents[2]
RUDDER = [sys.executable, "-c", "import sys; from rudder.cli import main; sys.exit(main())"]


@pytest.fixture
def database_url(sqlite_url: str) -> str:
    """The CLI talks HTTP only: one database is enough."""
    return sqlite_url


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUDDER_")}
    env["PYTHONPATH"] = str(ROOT)
    env["COLUMNS"] = "100"
    env.update(extra)
    return env


class Cli:
    """``rudder ARGS`` as a user runs it, with RUDDER_URL/RUDDER_TOKEN of a fresh user."""

    def __init__(self, api: ApiHarness) -> None:
        self.api = api
        _, self.headers = api.make_user()
        token = self.headers["Authorization"].split(" ", 1)[1]
        self.env = cli_env(RUDDER_URL=api.url, RUDDER_TOKEN=token)

    def __call__(self, *args: str, timeout: float = 60, **kwargs: Any
                 ) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*RUDDER, *args], env=self.env, cwd=kwargs.pop("cwd", ROOT),
                              capture_output=True, text=True, timeout=timeout, **kwargs)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([*RUDDER, *args], env=self.env, cwd=ROOT, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def submit(self, **spec: Any) -> str:
        response = self.api.client.post("/v1/jobs", json=digits_spec(**spec),
                                        headers=self.headers)
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def set_status(self, job_id: str, status: JobStatus, publish: bool = True) -> None:
        """What a worker does: the row's status, then the status event."""
        from sqlalchemy import update

        from core.models import Job

        with self.api.sessions() as session:
            session.execute(update(Job).where(Job.id == job_id).values(status=status.value))
            session.commit()
        if publish:
            self.channel(lambda ch: ch.publish_status(job_id, status.value))

    def channel(self, use: Callable[[Channel], Any]) -> Any:
        channel = Channel.from_url(self.api.settings.redis_url or "")
        try:
            return use(channel)
        finally:
            channel.close()


@pytest.fixture
def cli(api: ApiHarness) -> Iterator[Cli]:
    yield Cli(api)
