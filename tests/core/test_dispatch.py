"""The outbox dispatcher against a real redis-server the test kills and restarts, on
SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
import redis
from sqlalchemy.orm import Session, sessionmaker

from core import repositories as repo
from core.channel import Channel
from core.db import make_engine, make_sessionmaker, session_scope
from core.dispatch import Dispatcher, DispatcherThread
from core.models import Job, JobStatus
from tests.restartable_redis import RedisProcess
from tests.services import wait_until

SPEC = {"name": "t", "model": [{"type": "Dense", "units": 2}],
        "data": {"train": {"builtin": "digits"}}, "loss": {"type": "l2"},
        "optimizer": {"type": "sgd"}}


@pytest.fixture
def broker() -> Iterator[RedisProcess]:
    with RedisProcess() as process:
        yield process


@pytest.fixture(params=["sqlite", "postgresql"])
def own_sessions(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[sessionmaker[Session]]:
    """A database of this test's own, on SQLite and on PostgreSQL: a test that times how
    soon every queued job is sent again must not wait on other tests' queued jobs, which
    the shared session database holds and the dispatcher sends too."""
    from contextlib import ExitStack

    from core.migrate import upgrade
    from tests.services import postgres_database

    with ExitStack() as stack:
        if request.param == "sqlite":
            url = f"sqlite:///{tmp_path_factory.mktemp('dispatch') / 'rudder.db'}"
            upgrade(url)
        else:
            url = stack.enter_context(postgres_database())
        engine = make_engine(url)
        stack.callback(engine.dispose)
        yield make_sessionmaker(engine)


@pytest.fixture
def channel(broker: RedisProcess) -> Iterator[Channel]:
    chan = Channel.from_url(broker.url)
    yield chan
    chan.close()


def _dispatcher(sessions: sessionmaker[Session], channel: Channel, broker: RedisProcess,
                **tuning: float) -> Dispatcher:
    tuning = {"lost_after_seconds": 0.0, "check_interval_seconds": 0.0} | tuning
    return Dispatcher(sessions, channel, broker.url, **tuning)


def _queued_jobs(sessions: sessionmaker[Session], count: int = 1) -> list[str]:
    with session_scope(sessions) as session:
        user = repo.create_user(session, name=f"u-{uuid.uuid4().hex[:8]}")
        return [repo.create_job(session, owner_id=user.id, name="t", spec=SPEC,
                                queue="cpu").id for _ in range(count)]


def _messages(broker: RedisProcess, among: list[str]) -> Counter[str]:
    """How many ``rudder.train`` messages wait in the cpu queue for each of ``among``."""
    client = redis.Redis.from_url(broker.url)
    try:
        raw = client.lrange("cpu", 0, -1)
    finally:
        client.close()
    job_ids = (str(json.loads(base64.b64decode(json.loads(m)["body"]))[0][0]) for m in raw)
    return Counter(job_id for job_id in job_ids if job_id in among)


def _among(job_ids: list[str], mine: tuple[str, ...] | list[str]) -> list[str]:
    return [job_id for job_id in job_ids if job_id in mine]


def _row(sessions: sessionmaker[Session], job_id: str) -> Job:
    with session_scope(sessions) as session:
        job = repo.get_job(session, job_id=job_id)
        assert job is not None
        return job


def test_a_job_queued_while_the_broker_is_down_is_sent_when_it_returns(
    session_factory: sessionmaker[Session], broker: RedisProcess, channel: Channel
) -> None:
    dispatcher = _dispatcher(session_factory, channel, broker)
    broker.kill()
    [job_id] = _queued_jobs(session_factory)
    for _ in range(2):  # refused, and refused again: the outbox keeps it
        with pytest.raises(Exception):  # noqa: B017 - whatever kombu raises for "refused"
            dispatcher.run_once()
        assert _row(session_factory, job_id).dispatch_pending
    broker.start()
    assert job_id in dispatcher.run_once()
    assert _messages(broker, [job_id]) == {job_id: 1}
    row = _row(session_factory, job_id)
    assert not row.dispatch_pending and row.dispatched_at is not None
    # Sent once, not again (other tests' queued jobs share this database; only ours counts).
    assert job_id not in dispatcher.run_once()
    assert _messages(broker, [job_id]) == {job_id: 1}


def test_the_dispatch_thread_keeps_retrying_until_the_broker_takes_the_job(
    session_factory: sessionmaker[Session], broker: RedisProcess, channel: Channel
) -> None:
    thread = DispatcherThread(_dispatcher(session_factory, channel, broker, lost_after_seconds=2),
                              poll_seconds=0.5).start()
    try:
        broker.kill()
        job_ids = _queued_jobs(session_factory, 3)
        thread.wake()
        time.sleep(1.5)  # several failed passes
        broker.start()
        returned = time.monotonic()
        wait_until(lambda: len(_messages(broker, job_ids)) == 3, 10,
                   what="the outbox to be sent after the broker returned")
        assert time.monotonic() - returned < 10
    finally:
        thread.close()
    assert set(_messages(broker, job_ids).values()) == {1}


def test_queued_jobs_the_broker_lost_are_sent_again_within_seconds(
    own_sessions: sessionmaker[Session], broker: RedisProcess, channel: Channel
) -> None:
    """Redis restarted empty (no persistence): three queued jobs lost their messages."""
    job_ids = _queued_jobs(own_sessions, 3)
    dispatcher = _dispatcher(own_sessions, channel, broker, lost_after_seconds=2,
                             check_interval_seconds=1)
    dispatcher.run_once()
    assert len(_messages(broker, job_ids)) == 3
    broker.kill()
    broker.start(empty=True)
    returned = time.monotonic()
    thread = DispatcherThread(dispatcher, poll_seconds=1.0).start()
    try:
        wait_until(lambda: len(_messages(broker, job_ids)) == 3, 10,
                   what="the lost messages to be sent again")
        latency = time.monotonic() - returned
    finally:
        thread.close()
    assert latency < 10
    assert set(_messages(broker, job_ids).values()) == {1}  # once each, not per check


def test_jobs_the_broker_holds_or_a_worker_leased_are_not_sent_again(
    session_factory: sessionmaker[Session], broker: RedisProcess, channel: Channel
) -> None:
    mine = waiting, leased, lost = _queued_jobs(session_factory, 3)
    dispatcher = _dispatcher(session_factory, channel, broker)
    dispatcher.run_once(check_lost=False)
    client = redis.Redis.from_url(broker.url)
    for job_id in (leased, lost):  # their messages are gone: delivered, or lost
        for raw in client.lrange("cpu", 0, -1):
            if job_id.encode() in base64.b64decode(json.loads(raw)["body"]):
                client.lrem("cpu", 1, raw)
    client.close()
    assert channel.acquire_lease(leased, owner="worker-1", ttl_ms=60_000)
    # (Other tests' queued jobs share the database; only these three are looked at.)
    assert _among(dispatcher.requeue_lost(), mine) == []  # a first sighting is a suspicion
    assert _among(dispatcher.requeue_lost(), mine) == [lost]
    dispatcher.run_once(check_lost=False)
    assert _messages(broker, [waiting, leased, lost]) == {waiting: 1, lost: 1}


def test_a_message_a_dead_worker_held_unacknowledged_counts_as_lost(
    session_factory: sessionmaker[Session], broker: RedisProcess, channel: Channel
) -> None:
    """Kombu hands such a message out again only after its visibility timeout (hours)."""
    mine = fresh, stale = _queued_jobs(session_factory, 2)
    dispatcher = _dispatcher(session_factory, channel, broker, unacked_max_age_seconds=60)
    dispatcher.run_once(check_lost=False)
    client = redis.Redis.from_url(broker.url, decode_responses=True)
    for job_id, delivered_at in ((fresh, time.time()), (stale, time.time() - 3600)):
        [raw] = [m for m in client.lrange("cpu", 0, -1)
                 if job_id in base64.b64decode(json.loads(m)["body"]).decode()]
        client.lrem("cpu", 1, raw)
        tag = uuid.uuid4().hex
        client.hset("unacked", tag, json.dumps([json.loads(raw), "", "cpu"]))
        client.zadd("unacked_index", {tag: delivered_at})
    client.close()
    dispatcher.requeue_lost()
    assert _among(dispatcher.requeue_lost(), mine) == [stale]


def test_dispatchers_of_several_processes_send_each_job_once(
    database_url: str, broker: RedisProcess, channel: Channel
) -> None:
    """Four api processes' dispatchers (own engines) racing over one backlog."""
    engines = [make_engine(database_url) for _ in range(4)]
    try:
        sessions = [make_sessionmaker(engine) for engine in engines]
        job_ids = _queued_jobs(sessions[0], 120)
        dispatchers = [_dispatcher(factory, channel, broker) for factory in sessions]
        start = threading.Barrier(len(dispatchers))
        errors: list[BaseException] = []

        def race(dispatcher: Dispatcher) -> None:
            start.wait()
            try:
                dispatcher.send_pending()
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=race, args=(d,)) for d in dispatchers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors
        counts = _messages(broker, job_ids)
        assert len(counts) == len(job_ids) and set(counts.values()) == {1}
    finally:
        for engine in engines:
            engine.dispose()


def test_leaving_the_queue_empties_the_outbox(
    session_factory: sessionmaker[Session], broker: RedisProcess, channel: Channel
) -> None:
    paused, resumed = _queued_jobs(session_factory, 2)
    with session_scope(session_factory) as session:
        for job_id in (paused, resumed):
            repo.transition_job(session, job_id=job_id, to_status=JobStatus.PAUSED)
        repo.transition_job(session, job_id=resumed, to_status=JobStatus.QUEUED)
    _dispatcher(session_factory, channel, broker).run_once()
    assert _messages(broker, [paused, resumed]) == {resumed: 1}
