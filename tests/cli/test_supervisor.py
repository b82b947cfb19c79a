"""rudder.supervisor: a dead child of ``rudder up`` is restarted with backoff, the rest
keep running (real child processes, killed with SIGKILL)."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

from rudder.supervisor import FIRST_BACKOFF_SECONDS, Child, Supervisor
from tests.services import wait_until

SLEEPER = "import time\nwhile True: time.sleep(0.05)"


def _tend_until(supervisor: Supervisor, name: str, timeout: float) -> float:
    """Tend until ``name`` is restarted; returns the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if name in supervisor.tend():
            return time.monotonic() - started
        time.sleep(0.02)
    raise AssertionError(f"{name} was not restarted within {timeout}s")


def test_a_killed_child_is_restarted_and_the_others_keep_running() -> None:
    supervisor = Supervisor()
    exits: list[tuple[str, int, int]] = []
    supervisor.on_exit["worker"] = lambda child, code: exits.append(
        (child.name, child.process.pid, code))
    try:
        for name in ("redis", "api", "worker"):
            supervisor.start(name, [sys.executable, "-c", SLEEPER], env={})
        others = {name: supervisor.child(name).process.pid for name in ("redis", "api")}
        dead = supervisor.child("worker").process
        dead.send_signal(signal.SIGKILL)
        dead.wait(5)
        waited = _tend_until(supervisor, "worker", 10)
        assert FIRST_BACKOFF_SECONDS * 0.9 <= waited < 5
        assert exits == [("worker", dead.pid, -signal.SIGKILL)]  # told before the restart
        replacement = supervisor.child("worker").process
        assert replacement.pid != dead.pid and replacement.poll() is None
        assert {name: supervisor.child(name).process.pid for name in others} == others
        assert all(supervisor.child(name).process.poll() is None for name in others)
    finally:
        supervisor.stop_all()


def test_a_child_that_keeps_dying_is_restarted_less_and_less_often() -> None:
    supervisor = Supervisor()
    try:
        supervisor.start("worker", [sys.executable, "-c", "raise SystemExit(3)"], env={})
        waits = [_tend_until(supervisor, "worker", 20) for _ in range(4)]
    finally:
        supervisor.stop_all()
    # 0.5, 1, 2, 4 s (plus the child's own start-up before it dies)
    assert waits[0] < waits[1] < waits[2] < waits[3]
    assert waits[3] >= 8 * FIRST_BACKOFF_SECONDS


def test_stop_all_starts_a_dead_redis_first_so_the_worker_can_stop_through_it(
        tmp_path: Path) -> None:
    log = tmp_path / "order.log"
    child_code = ("import signal, sys, time\n"
                  f"open({str(log)!r}, 'a').write(sys.argv[1] + ' up\\n')\n"
                  "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
                  "while True: time.sleep(0.05)")
    supervisor = Supervisor()
    for name in ("redis", "worker"):
        supervisor.start(name, [sys.executable, "-c", child_code, name], env={})
    wait_until(lambda: log.read_text().count(" up") == 2, 10, what="children up")
    redis_child: Child = supervisor.child("redis")
    killed = redis_child.process
    killed.send_signal(signal.SIGKILL)
    killed.wait(5)
    supervisor.stop_all()  # before any tend(): the supervisor had not noticed yet
    revived = redis_child.process
    assert revived.pid != killed.pid
    assert revived.returncode == 0  # it was running, and stopped with SIGTERM after the worker


def test_a_dead_workers_leases_are_released_and_its_queued_job_sent_again(
        tmp_path: Path, redis_url: str) -> None:
    """Killed between taking a job's lease and marking it running: the job is queued,
    its message unacknowledged in a dead worker's name. The exit hook frees both."""
    import socket

    from core import repositories as repo
    from core.channel import Channel, lease_key
    from core.db import make_engine, make_sessionmaker, session_scope
    from core.migrate import upgrade
    from rudder.embedded import release_leases_of_dead_worker

    database_url = f"sqlite:///{tmp_path / 'rudder.db'}"
    upgrade(database_url)
    engine = make_engine(database_url)
    sessions = make_sessionmaker(engine)
    with session_scope(sessions) as session:
        user = repo.create_user(session, name="u")
        job_ids = [repo.create_job(session, owner_id=user.id, name="t", spec={},
                                   queue="cpu").id for _ in range(2)]
        assert repo.claim_jobs_to_dispatch(session, limit=10)  # both sent
    dead, alive = job_ids
    supervisor = Supervisor()
    channel = Channel.from_url(redis_url)
    try:
        process = supervisor.start("worker", [sys.executable, "-c", SLEEPER], env={})
        host = socket.gethostname()
        assert channel.acquire_lease(dead, owner=f"{host}:{process.pid}:abc", ttl_ms=60_000)
        assert channel.acquire_lease(alive, owner=f"{host}:1{process.pid}:abc", ttl_ms=60_000)
        supervisor.on_exit["worker"] = release_leases_of_dead_worker(redis_url, database_url)
        process.send_signal(signal.SIGKILL)
        process.wait(5)
        supervisor.tend()
        assert channel.lease_owner(dead) is None
        assert channel.lease_owner(alive) == f"{host}:1{process.pid}:abc"
        with session_scope(sessions) as session:
            assert repo.claim_jobs_to_dispatch(session, limit=10) == [(dead, "cpu")]
    finally:
        supervisor.stop_all()
        channel.client.delete(*(lease_key(job_id) for job_id in job_ids))
        channel.close()
        engine.dispose()
