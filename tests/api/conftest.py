from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.config import Settings
from tests.api.browser import headless_chromium
from tests.conftest import TEST_SECRET, ApiHarness, serve
from tests.restartable_redis import RedisProcess


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless Chromium (mark the test ``requires_chromium`` from tests.api.browser)."""
    with headless_chromium() as driver:
        yield driver


@pytest.fixture
def sqlite_api(sqlite_url: str, redis_url: str, tmp_path: Path) -> Iterator[ApiHarness]:
    """The api on the embedded database only, for tests (browser, docs) where the backend
    does not matter; the api tests proper run on both."""
    settings = Settings(
        environment="test", secret_key=TEST_SECRET, database_url=sqlite_url,
        redis_url=redis_url, storage_url=f"file://{tmp_path / 'objects'}",
    )
    with serve(settings) as harness:
        yield harness


@pytest.fixture
def private_redis() -> Iterator[RedisProcess]:
    with RedisProcess() as server:
        yield server
