from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import update

from core import repositories as repo
from core.channel import Channel
from core.db import session_scope
from core.events import CancelCommand, PauseCommand
from core.models import Job, JobStatus, utcnow
from workers.lease import Lease
from workers.resources import get_dispatcher
from workers.watchdog import sweep

SPEC = {"name": "t", "model": [{"type": "Dense", "units": 2}],
        "data": {"train": {"builtin": "digits"}}, "loss": {"type": "l2"},
        "optimizer": {"type": "sgd"}}


def _job(status: JobStatus) -> str:
    with session_scope() as session:
        user = repo.create_user(session, name=f"u-{utcnow().timestamp()}")
        job = repo.create_job(session, owner_id=user.id, name="t", spec=SPEC, queue="cpu")
        if status != JobStatus.QUEUED:
            repo.transition_job(session, job_id=job.id, to_status=status)
        return job.id


def _queued_tasks(channel: Channel) -> list[list[str]]:
    """Job ids of rudder.train messages waiting in Celery's 'cpu' queue."""
    bodies = [json.loads(raw) for raw in channel.client.lrange("cpu", 0, -1)]
    return [m["headers"]["argsrepr"] for m in bodies if m["headers"]["task"] == "rudder.train"]


def _status(job_id: str) -> tuple[str, int]:
    with session_scope() as session:
        job = repo.get_job(session, job_id=job_id)
        assert job is not None
        return job.status, job.attempts


def test_orphaned_running_job_is_requeued_once(worker_env: dict[str, str],
                                               channel: Channel) -> None:
    orphan = _job(JobStatus.RUNNING)
    alive = _job(JobStatus.RUNNING)
    lease = Lease(channel, alive, ttl_seconds=5)
    assert lease.acquire()
    try:
        assert sweep(channel) == [orphan]
        assert sweep(channel) == []  # a second watchdog finds nothing left to do
        assert get_dispatcher().run_once() == [orphan]
        assert get_dispatcher().run_once() == []  # sent once
    finally:
        lease.release()
    assert _status(orphan) == ("queued", 1)
    assert _status(alive) == ("running", 0)
    assert _queued_tasks(channel) == [repr([orphan])]
    events = channel.read_events(orphan)
    assert [(e.type, e.data["status"]) for e in events] == [("status", "queued")]
    assert "lease expired" in events[0].data["reason"]


def test_pause_or_cancel_a_lost_worker_never_applied_is_carried_out(
    worker_env: dict[str, str], channel: Channel
) -> None:
    paused, cancelled, earlier = (_job(JobStatus.RUNNING) for _ in range(3))
    channel.send_command(paused, PauseCommand())
    channel.send_command(cancelled, PauseCommand())
    channel.send_command(cancelled, CancelCommand())
    with session_scope() as session:  # this job's pause was sent before its latest start
        channel.send_command(earlier, PauseCommand())
        session.execute(update(Job).where(Job.id == earlier)
                        .values(started_at=utcnow() + timedelta(seconds=5)))
    assert sweep(channel) == [earlier]
    get_dispatcher().run_once()
    assert _status(paused) == ("paused", 0)
    assert _status(cancelled) == ("cancelled", 0)
    assert _status(earlier) == ("queued", 1)
    assert _queued_tasks(channel) == [repr([earlier])]
    status = channel.read_events(paused)[-1].data
    assert status["status"] == "paused" and "latest checkpoint stands" in status["reason"]


def test_job_lost_too_often_fails(worker_env: dict[str, str], channel: Channel) -> None:
    job_id = _job(JobStatus.RUNNING)
    assert sweep(channel, max_attempts=0) == []
    get_dispatcher().run_once()
    status, attempts = _status(job_id)
    assert (status, attempts) == ("failed", 1)
    assert _queued_tasks(channel) == []
