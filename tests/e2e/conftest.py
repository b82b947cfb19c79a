from __future__ import annotations

import copy
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from rudder.client import Client
from tests import services
from tests.e2e.harness import ROOT, Stack, running_stack, stack_env


@pytest.fixture(scope="session")
def e2e_redis_url() -> Iterator[str]:
    with services.redis_server() as url:
        yield url


@pytest.fixture(scope="session")
def e2e_pg_url() -> Iterator[str]:
    with services.postgres_database() as url:
        yield url


@pytest.fixture(scope="session")
def stack(e2e_pg_url: str, e2e_redis_url: str,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """API + one worker on PostgreSQL, a private Redis and a local object store."""
    home = tmp_path_factory.mktemp("e2e")
    env = stack_env(e2e_pg_url, e2e_redis_url, f"file://{home / 'objects'}")
    with running_stack(env, home, user="e2e-user") as running:
        yield running


@pytest.fixture
def client(stack: Stack) -> Iterator[Client]:
    with Client(stack.api_url, stack.token, timeout=30) as api_client:
        yield api_client


def example_spec(**overrides: Any) -> dict[str, Any]:
    """examples/digits-mlp.yaml with top-level overrides (e.g. epochs)."""
    spec = yaml.safe_load((ROOT / "examples" / "digits-mlp.yaml").read_text())
    merged = copy.deepcopy(spec)
    merged.update(overrides)
    return dict(merged)


@pytest.fixture
def examples_dir() -> Path:
    return ROOT / "examples"


def final_params(client: Client, job_id: str, tmp_path: Path) -> dict[str, np.ndarray]:
    """The weights of the job's latest checkpoint, as downloaded."""
    checkpoints = client.checkpoints(job_id)["data"]
    latest = max(checkpoints, key=lambda c: c["step"])
    path = client.download_checkpoint(job_id, latest["step"], "params.npz",
                                      tmp_path / job_id / "params.npz")
    with np.load(io.BytesIO(path.read_bytes()), allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}
