"""Lost or stuck work (issue 14, items 7 and 10): real API and worker processes, a
redis-server the test kills and restarts, on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from core.channel import lease_key
from core.migrate import upgrade
from rudder.client import Client
from tests import services
from tests.e2e.conftest import example_spec
from tests.e2e.harness import Stack, stack_env
from tests.restartable_redis import RedisProcess
from tests.services import wait_until

pytestmark = pytest.mark.slow

# What issue 14 asks of the product: re-sent within 10 s of the broker's return, taken
# over within 10 s of a worker's death.
RECOVERY_SECONDS = 10.0


@dataclass
class FaultyStack:
    stack: Stack
    broker: RedisProcess
    client: Client

    def status(self, job_id: str) -> str:
        return str(self.client.get_job(job_id)["status"])

    def lease_holder(self, job_id: str) -> str | None:
        connection = redis.Redis.from_url(self.broker.url, decode_responses=True)
        try:
            holder = connection.get(lease_key(job_id))
        finally:
            connection.close()
        return str(holder) if holder else None

    def waiting_messages(self) -> int:
        connection = redis.Redis.from_url(self.broker.url)
        try:
            return int(connection.llen("cpu"))
        finally:
            connection.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def faulty(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FaultyStack]:
    """An API (no worker yet) on the parametrized database, with the product's own lease
    and watchdog timings, and a broker the test may kill."""
    with ExitStack() as exit_stack:
        if request.param == "sqlite":
            database_url = f"sqlite:///{tmp_path / 'rudder.db'}"
            upgrade(database_url)
        else:
            database_url = exit_stack.enter_context(services.postgres_database())
        broker = exit_stack.enter_context(RedisProcess())
        env = stack_env(database_url, broker.url, f"file://{tmp_path / 'objects'}")
        for product_default in ("RUDDER_WORKER_LEASE_TTL_SECONDS",
                                "RUDDER_WORKER_WATCHDOG_INTERVAL_SECONDS"):
            env.pop(product_default)
        stack = Stack(env=env, logs=tmp_path)
        exit_stack.callback(stack.stop)
        stack.start_api()
        stack.token = stack.issue_token("faults")
        client = exit_stack.enter_context(Client(stack.api_url, stack.token, timeout=30))
        try:
            yield FaultyStack(stack, broker, client)
        except BaseException:
            print(stack.log_tail())
            raise


def test_a_job_submitted_while_redis_is_down_runs_once_it_is_back(
        faulty: FaultyStack) -> None:
    faulty.stack.start_worker()
    faulty.broker.kill()
    job = faulty.client.submit(example_spec(name="submitted-in-the-dark", epochs=2))
    assert job["status"] == "queued"
    time.sleep(3)  # the dispatcher fails a few times meanwhile
    assert faulty.status(job["id"]) == "queued"
    faulty.broker.start(empty=True)
    returned = time.monotonic()
    wait_until(lambda: faulty.status(job["id"]) in ("running", "succeeded"),
               RECOVERY_SECONDS + 20, interval=0.2, what="the job to start")
    started_after = time.monotonic() - returned
    wait_until(lambda: faulty.status(job["id"]) == "succeeded", 120, interval=0.5,
               what="the job to finish")
    print(f"started {started_after:.1f}s after Redis returned")
    assert started_after <= RECOVERY_SECONDS


def test_queued_jobs_whose_messages_redis_lost_are_sent_again_and_run(
        faulty: FaultyStack) -> None:
    jobs = [faulty.client.submit(example_spec(name=f"lost-{n}", epochs=1)) for n in range(3)]
    wait_until(lambda: faulty.waiting_messages() == 3, 10, what="the three messages")
    faulty.broker.kill()
    faulty.broker.start(empty=True)  # a restart without persistence: the queue is gone
    returned = time.monotonic()
    wait_until(lambda: faulty.waiting_messages() == 3, RECOVERY_SECONDS + 20, interval=0.1,
               what="the lost messages to be sent again")
    resent_after = time.monotonic() - returned
    time.sleep(3)  # later checks find the messages and send nothing more
    assert faulty.waiting_messages() == 3
    faulty.stack.start_worker()
    for job in jobs:
        wait_until(lambda job=job: faulty.status(job["id"]) == "succeeded", 120,
                   interval=0.5, what=f"job {job['name']} to finish")
    print(f"re-sent {resent_after:.1f}s after Redis returned empty")
    assert resent_after <= RECOVERY_SECONDS


def test_a_killed_workers_job_is_taken_over_by_another_within_seconds(
        faulty: FaultyStack) -> None:
    workers = [faulty.stack.start_worker() for _ in range(2)]
    job = faulty.client.submit(example_spec(name="take-me-over", epochs=400))
    holder = wait_until(lambda: faulty.lease_holder(job["id"]), 60, interval=0.1,
                        what="a worker to take the job")
    [victim] = [w for w in workers if f":{w.pid}:" in holder]
    wait_until(lambda: faulty.status(job["id"]) == "running", 20, what="running")
    faulty.stack.kill_worker(victim)
    killed = time.monotonic()
    new_holder = wait_until(
        lambda: (h := faulty.lease_holder(job["id"])) and h != holder and h,
        RECOVERY_SECONDS + 30, interval=0.05, what="another worker to take the job over")
    taken_over_after = time.monotonic() - killed
    [survivor] = [w for w in workers if w is not victim]
    assert f":{survivor.pid}:" in new_holder
    wait_until(lambda: faulty.status(job["id"]) == "running", 10, what="running again")
    assert faulty.client.get_job(job["id"])["attempts"] == 1
    faulty.client.cancel(job["id"])
    print(f"taken over {taken_over_after:.1f}s after the kill")
    assert taken_over_after <= RECOVERY_SECONDS
