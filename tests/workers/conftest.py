from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from core.channel import Channel
from core.config import get_settings
from core.db import reset_engine_cache
from core.storage import LocalStore, ObjectStore
from core.storage_s3 import S3Store
from tests import services


# Private Redis and PostgreSQL database for worker tests (not the shared session ones):
# these tests flush Redis and truncate tables between tests.
@pytest.fixture(scope="session")
def worker_redis_url() -> Iterator[str]:
    with services.redis_server() as url:
        yield url


@pytest.fixture(scope="session")
def worker_pg_url() -> Iterator[str]:
    with services.postgres_database() as url:
        yield url


@pytest.fixture
def worker_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, worker_redis_url: str, worker_pg_url: str
) -> Iterator[dict[str, str]]:
    """Point core's settings at the private services for one test."""
    env = {
        "RUDDER_ENVIRONMENT": "development",
        "RUDDER_DATABASE_URL": worker_pg_url,
        "RUDDER_REDIS_URL": worker_redis_url,
        "RUDDER_STORAGE_URL": f"file://{tmp_path / 'objects'}",
        "RUDDER_WORKER_LEASE_TTL_SECONDS": "2",
        # These jobs train in well under a second; tests count their interval checkpoints.
        "RUDDER_WORKER_CHECKPOINT_MIN_INTERVAL_SECONDS": "0",
        "RUDDER_WORKER_SPOOL_DIR": str(tmp_path / "spool"),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    _clear_caches()
    services.truncate_all(worker_pg_url)
    yield env
    _clear_caches()


def _clear_caches() -> None:
    from workers.resources import get_channel, get_dispatcher, get_store
    from workers.settings import get_worker_settings

    get_settings.cache_clear()
    get_worker_settings.cache_clear()
    get_channel.cache_clear()
    get_store.cache_clear()
    get_dispatcher.cache_clear()
    reset_engine_cache()


@pytest.fixture
def channel(worker_redis_url: str) -> Iterator[Channel]:
    chan = Channel.from_url(worker_redis_url)
    chan.client.flushdb()
    yield chan
    chan.close()


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """Every storage test runs on a local directory and on S3 over HTTP (moto)."""
    if request.param == "local":
        return LocalStore(tmp_path / "store")
    endpoint = request.getfixturevalue("s3_endpoint")  # tests/conftest.py: moto over HTTP
    bucket = f"rudder-{uuid.uuid4().hex[:12]}"
    client = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id="test", aws_secret_access_key="test",
    )
    client.create_bucket(Bucket=bucket)
    return S3Store(bucket, "prefix", client=client)
