from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
