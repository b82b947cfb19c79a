"""Worker DB writes survive a real PostgreSQL outage: spooled, retried, never dropped."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import create_engine
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from core import repositories as repo
from core.channel import Channel
from core.db import make_sessionmaker, session_scope
from core.job_status import transition_and_announce
from core.models import JobStatus, LRChangeMode
from tests.services import wait_until
from tests.workers.db_outage import outage_controller
from tests.workers.jobs import lr_outcome, stored_job
from workers.db_retry import retry_db
from workers.service_io import ControlListener, ServiceIO

T = TypeVar("T")

def _job() -> tuple[str, str]:
    return stored_job("spool-user")


def _service_io(channel: Channel, job_id: str, spool_dir: Path) -> ServiceIO:
    listener = ControlListener(channel, job_id)
    return ServiceIO(channel, job_id, still_owner=lambda: True, listener=listener,
                     spool_dir=spool_dir, db_retry_seconds=30)


def _record_steps(io: ServiceIO, steps: range) -> None:
    for step in steps:
        io.record_metrics(step, epoch=step // 10, values={"train_loss": 1.0 / step,
                                                          "lr": 0.1})


def _read(query: Callable[[Session], T]) -> T:
    # A connection of its own each time: the test reads, it is not the worker under test
    # (whose pooled connections the outage killed and which must recover by itself).
    engine = create_engine(os.environ["RUDDER_DATABASE_URL"], poolclass=NullPool)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            return query(session)
    finally:
        engine.dispose()


def _stored(job_id: str) -> list[tuple[int, str, float]]:
    return _read(lambda session: [(p.step, p.name, p.value)
                                  for p in repo.list_metric_points(session, job_id=job_id)])


def _status(job_id: str) -> str | None:
    job = _read(lambda session: repo.get_job(session, job_id=job_id))
    return None if job is None else job.status


def _expected(steps: range) -> list[tuple[int, str, float]]:
    return sorted([(s, "lr", 0.1) for s in steps] + [(s, "train_loss", 1.0 / s) for s in steps])


def test_points_written_during_an_outage_are_spooled_then_stored_in_order_once(
        worker_env: dict[str, str], channel: Channel, tmp_path: Path) -> None:
    job_id, user_id = _job()
    with session_scope() as session:
        change = repo.create_lr_change(session, job_id=job_id, requested_lr=0.05,
                                       mode=LRChangeMode.SCALE, requested_by=user_id)
    io = _service_io(channel, job_id, tmp_path / "spool")
    spool_file = tmp_path / "spool" / f"{job_id}.jsonl"
    with outage_controller(worker_env["RUDDER_DATABASE_URL"]) as outage:
        _record_steps(io, range(1, 6))
        io.flush()
        assert _stored(job_id) == _expected(range(1, 6))

        outage.start()
        _record_steps(io, range(6, 41))
        io.command_done(lr_outcome(change.id, 0.05, step=41))
        io.record_progress(41, 4, 0.05, {"train_loss": 1 / 40})
        _record_steps(io, range(41, 81))
        io.flush()  # returns: the points are safe in the spool file, not lost
        spooled = [json.loads(line) for line in spool_file.read_text().splitlines()]
        assert {r["kind"] for r in spooled} == {"points", "command"}
        spooled_steps = {p[0] for r in spooled if r["kind"] == "points" for p in r["points"]}
        assert spooled_steps == set(range(6, 81))
        assert io.spool.failures >= 1
        time.sleep(1.5)  # a few more refused attempts (backoff), nothing lost meanwhile
        outage.end()

    wait_until(lambda: len(_stored(job_id)) == 160, 30, what="spooled points stored")
    assert _stored(job_id) == _expected(range(1, 81))  # every point, exactly once
    wait_until(lambda: not spool_file.exists(), 10, what="spool file removed")
    with session_scope() as session:
        applied = repo.list_lr_changes(session, job_id=job_id)[0]
        job = repo.get_job(session, job_id=job_id)
    assert (applied.status, applied.applied_step) == ("applied", 41)
    assert job is not None and (job.step, job.current_lr) == (41, 0.05)
    io.close()


def _spool_then_wait(job_id: str, spool_dir: str, ready: str) -> None:
    """Child process: record points while the DB is down, flush, then wait to be killed."""
    from workers.resources import get_channel

    io = _service_io(get_channel(), job_id, Path(spool_dir))
    _record_steps(io, range(1, 31))
    io.flush()
    Path(ready).touch()
    time.sleep(120)


def test_points_spooled_by_a_killed_worker_are_sent_by_the_next_run(
        worker_env: dict[str, str], channel: Channel, tmp_path: Path) -> None:
    job_id, _ = _job()
    spool_dir, ready = tmp_path / "spool", tmp_path / "ready"
    with outage_controller(worker_env["RUDDER_DATABASE_URL"]) as outage:
        outage.start()
        child = multiprocessing.get_context("spawn").Process(
            target=_spool_then_wait, args=(job_id, str(spool_dir), str(ready)))
        child.start()
        wait_until(ready.exists, 60, what="the child spooled its points")
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        outage.end()
    assert _stored(job_id) == []  # the dead worker stored nothing ...
    io = _service_io(channel, job_id, spool_dir)  # ... the next run of the job sends it
    wait_until(lambda: len(_stored(job_id)) == 60, 20, what="spooled points stored")
    io.close()
    assert _stored(job_id) == _expected(range(1, 31))
    assert not (spool_dir / f"{job_id}.jsonl").exists()


def test_a_status_write_is_retried_until_the_database_answers(
        worker_env: dict[str, str], channel: Channel) -> None:
    job_id, _ = _job()
    result: dict[str, Any] = {}

    def finish() -> bool:
        with session_scope() as session:
            return transition_and_announce(session, channel, job_id=job_id,
                                           to_status=JobStatus.FAILED,
                                           from_statuses=[JobStatus.QUEUED], reason="out of data")

    with outage_controller(worker_env["RUDDER_DATABASE_URL"]) as outage:
        outage.start()
        writer = threading.Thread(target=lambda: result.update(
            moved=retry_db(finish, what="final status", deadline_seconds=30)))
        writer.start()
        time.sleep(1.5)
        assert writer.is_alive()  # still retrying, not failed
        outage.end()
        writer.join(30)
    assert result == {"moved": True}
    with session_scope() as session:
        job = repo.get_job(session, job_id=job_id)
    assert job is not None and (job.status, job.status_reason) == ("failed", "out of data")


def test_retrying_gives_up_at_its_deadline_and_never_retries_a_wrong_write(
        worker_env: dict[str, str]) -> None:
    calls: list[int] = []

    def duplicate_user() -> None:
        calls.append(1)
        with session_scope() as session:
            repo.create_user(session, name="same")

    duplicate_user()
    with pytest.raises(sa_exc.IntegrityError):
        retry_db(duplicate_user, what="dup", deadline_seconds=30)
    assert len(calls) == 2  # a constraint violation is not retried

    def create() -> None:
        with session_scope() as session:
            repo.create_user(session, name="other")

    with outage_controller(worker_env["RUDDER_DATABASE_URL"]) as outage:
        outage.start()
        started = time.monotonic()
        with pytest.raises(sa_exc.OperationalError):
            retry_db(create, what="during outage", deadline_seconds=1.0)
        assert time.monotonic() - started < 5


def test_a_job_trained_through_an_outage_keeps_every_point_and_a_true_final_status(
        worker_env: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    from core.jobspec import parse_spec
    from tests.workers.test_runner import SPEC as TRAIN_SPEC
    from workers.lifecycle import run_job

    spec = parse_spec({**TRAIN_SPEC, "epochs": 20}).model_dump(mode="json")
    with session_scope() as session:
        user = repo.create_user(session, name="outage")
        job_id = repo.create_job(session, owner_id=user.id, name="outage", spec=spec,
                                 queue="cpu").id
    result: dict[str, str] = {}
    worker = threading.Thread(target=lambda: result.update(outcome=run_job(job_id).result))
    with outage_controller(worker_env["RUDDER_DATABASE_URL"]) as outage:
        worker.start()
        wait_until(lambda: _status(job_id) == "running", 30, what="job running")
        outage.start()
        time.sleep(2.0)
        outage.end()
        worker.join(120)
    assert result == {"outcome": "succeeded"}
    # The outage did hit the worker's writes (points, a checkpoint row or the status).
    assert any(r.name == "workers.db_retry" and r.levelname == "WARNING"
               for r in caplog.records)

    def final(session: Session) -> tuple[Any, ...]:
        job = repo.get_job(session, job_id=job_id)
        assert job is not None
        points = repo.list_metric_points(session, job_id=job_id, names=["val_accuracy"])
        rows = repo.list_checkpoints(session, job_id=job_id)
        return job.status, job.status_reason, [p.epoch for p in points], rows[-1].step, job.step

    status, reason, epochs, last_checkpoint, step = _read(final)
    assert (status, reason) == ("succeeded", None)
    assert epochs == list(range(20))  # every epoch's points are stored
    assert last_checkpoint == step


def test_points_written_while_sqlite_is_locked_wait_and_are_stored_once(
        worker_env: dict[str, str], channel: Channel, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from core.migrate import upgrade
    from tests.workers.conftest import _clear_caches

    database = tmp_path / "rudder.db"
    upgrade(f"sqlite:///{database}")
    monkeypatch.setenv("RUDDER_DATABASE_URL", f"sqlite:///{database}")
    _clear_caches()
    job_id, _ = _job()
    io = _service_io(channel, job_id, tmp_path / "spool")
    _record_steps(io, range(1, 6))
    io.flush()
    assert _stored(job_id) == _expected(range(1, 6))

    # Another process's writer holds the lock past the worker's busy timeout (10 s).
    locker = sqlite3.connect(database, isolation_level=None)
    try:
        locker.execute("BEGIN EXCLUSIVE")
        _record_steps(io, range(6, 41))
        spool_file = tmp_path / "spool" / f"{job_id}.jsonl"
        wait_until(spool_file.is_file, 30, what="a write refused as locked, then spooled")
        assert io.spool.failures >= 1
        assert _stored(job_id) == _expected(range(1, 6))  # (WAL: reads still work)
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    wait_until(lambda: len(_stored(job_id)) == 80, 30, what="points stored after the lock")
    io.close()
    assert _stored(job_id) == _expected(range(1, 41))


def _confirm_change_then_wait(job_id: str, change_id: str, spool_dir: str, ready: str) -> None:
    """Child process: a run that applied an LR change at step 25 while the DB was down."""
    from workers.resources import get_channel

    io = _service_io(get_channel(), job_id, Path(spool_dir))
    _record_steps(io, range(1, 6))
    io.command_done(lr_outcome(change_id, 0.002, step=25))
    io.flush()
    Path(ready).touch()
    time.sleep(120)


def test_a_change_confirmed_only_in_a_dead_runs_spool_is_replayed_at_its_step(
        worker_env: dict[str, str], tmp_path: Path) -> None:
    from core.jobspec import parse_spec
    from tests.workers.test_runner import SPEC as TRAIN_SPEC
    from workers.lifecycle import run_job

    spec = parse_spec({**TRAIN_SPEC, "epochs": 3, "lr_scheduler": None}).model_dump(
        mode="json")
    with session_scope() as session:
        user = repo.create_user(session, name="replay")
        job_id = repo.create_job(session, owner_id=user.id, name="replay", spec=spec,
                                 queue="cpu").id
        change_id = repo.create_lr_change(session, job_id=job_id, requested_lr=0.002,
                                          mode=LRChangeMode.SCALE, requested_by=user.id).id
    ready = tmp_path / "ready"
    with outage_controller(worker_env["RUDDER_DATABASE_URL"]) as outage:
        outage.start()
        child = multiprocessing.get_context("spawn").Process(
            target=_confirm_change_then_wait,
            args=(job_id, change_id, worker_env["RUDDER_WORKER_SPOOL_DIR"], str(ready)))
        child.start()
        wait_until(ready.exists, 60, what="the child spooled its confirmation")
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join()
    # The DB still says "pending"; the next run must not apply it again from step 1.
    assert run_job(job_id).result == "succeeded"
    with session_scope() as session:
        change = repo.list_lr_changes(session, job_id=job_id)[0]
        lr = {p.step: p.value for p in repo.list_metric_points(session, job_id=job_id,
                                                               names=["lr"])}
    assert (change.status, change.applied_step) == ("applied", 25)
    before = [value for step, value in lr.items() if 5 < step < 25]  # (1-5: the dead run's)
    after = [value for step, value in lr.items() if step >= 25]
    assert before and after
    assert before == pytest.approx([0.01] * len(before))
    assert after == pytest.approx([0.002] * len(after))


REFUSE_FINAL_STATUS = """
CREATE FUNCTION refuse_final_status() RETURNS trigger AS $$
BEGIN
    IF NEW.status = 'succeeded' THEN
        RAISE EXCEPTION 'test fault: the final status write fails'
            USING ERRCODE = 'admin_shutdown';
    END IF;
    RETURN NEW;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER refuse_final_status BEFORE UPDATE ON jobs
    FOR EACH ROW EXECUTE FUNCTION refuse_final_status();
"""


def test_a_failed_final_status_write_is_retried_and_the_job_never_looks_lost(
        worker_env: dict[str, str], channel: Channel, caplog: pytest.LogCaptureFixture) -> None:
    """PostgreSQL refuses exactly the write that records success (a trigger raising the
    error a server shutting down sends), until the test lifts it."""
    from core.jobspec import parse_spec
    from tests.workers.test_runner import SPEC as TRAIN_SPEC
    from workers.lifecycle import run_job
    from workers.watchdog import sweep

    spec = parse_spec({**TRAIN_SPEC, "epochs": 2}).model_dump(mode="json")
    with session_scope() as session:
        user = repo.create_user(session, name="final")
        job_id = repo.create_job(session, owner_id=user.id, name="final", spec=spec,
                                 queue="cpu").id
    fault = create_engine(worker_env["RUDDER_DATABASE_URL"], poolclass=NullPool)
    with fault.begin() as conn:
        conn.exec_driver_sql(REFUSE_FINAL_STATUS)
    result: dict[str, str] = {}
    worker = threading.Thread(target=lambda: result.update(outcome=run_job(job_id).result))
    try:
        worker.start()
        wait_until(lambda: "status succeeded: database error" in caplog.text, 60,
                   what="the final status write refused")
        time.sleep(2.5)  # longer than the lease TTL (2 s): the worker must still hold it
        assert _status(job_id) == "running"
        assert sweep(channel) == []  # not "lost"
    finally:
        with fault.begin() as conn:
            conn.exec_driver_sql("DROP TRIGGER refuse_final_status ON jobs; "
                                 "DROP FUNCTION refuse_final_status();")
        fault.dispose()
        worker.join(60)
    assert result == {"outcome": "succeeded"}
    with session_scope() as session:
        job = repo.get_job(session, job_id=job_id)
        history = [(e.status, e.reason) for e in repo.list_status_events(session, job_id=job_id)]
    assert job is not None and (job.status, job.status_reason) == ("succeeded", None)
    assert [status for status, _ in history] == ["queued", "running", "succeeded"]
