"""Delivery semantics of rudder.train: duplicates never run a job twice at once."""

from __future__ import annotations

import pytest

from core import repositories as repo
from core.channel import Channel
from core.db import session_scope
from core.models import JobStatus
from workers.lease import Lease
from workers.lifecycle import LeaseBusy, run_job

SPEC = {"name": "t", "model": [{"type": "Dense", "units": 10}],
        "data": {"train": {"builtin": "digits"}}, "loss": {"type": "softmax_cross_entropy"},
        "optimizer": {"type": "sgd"}, "device": "cpu"}


def _job(status: JobStatus = JobStatus.QUEUED) -> str:
    with session_scope() as session:
        user = repo.create_user(session, name="lifecycle")
        job = repo.create_job(session, owner_id=user.id, name="t", spec=SPEC, queue="cpu")
        if status != JobStatus.QUEUED:
            repo.transition_job(session, job_id=job.id, to_status=status)
        return job.id


def _status(job_id: str) -> str:
    with session_scope() as session:
        job = repo.get_job(session, job_id=job_id)
        assert job is not None
        return job.status


def test_duplicate_delivery_of_a_running_job_is_skipped(worker_env: dict[str, str],
                                                        channel: Channel) -> None:
    job_id = _job(JobStatus.RUNNING)
    owner = Lease(channel, job_id, ttl_seconds=5)
    assert owner.acquire()
    try:
        assert run_job(job_id).result == "skipped:running elsewhere"
    finally:
        owner.release()
    assert _status(job_id) == "running"
    assert channel.read_events(job_id) == []  # the duplicate wrote nothing


def test_queued_job_whose_old_lease_is_still_held_is_retried_later(
    worker_env: dict[str, str], channel: Channel
) -> None:
    job_id = _job()  # e.g. resumed right after a pause, before the old worker let go
    previous = Lease(channel, job_id, ttl_seconds=5)
    assert previous.acquire()
    try:
        with pytest.raises(LeaseBusy):
            run_job(job_id)
    finally:
        previous.release()
    assert _status(job_id) == "queued"


@pytest.mark.parametrize("status", [JobStatus.PAUSED, JobStatus.CANCELLED, JobStatus.SUCCEEDED])
def test_task_for_a_job_that_is_not_runnable_does_nothing(
    worker_env: dict[str, str], channel: Channel, status: JobStatus
) -> None:
    job_id = _job(status)
    assert run_job(job_id).result == f"skipped:{status.value}"
    assert _status(job_id) == status.value
    assert channel.lease_owner(job_id) is None


def test_the_workers_lines_about_a_job_reach_its_event_stream(
    worker_env: dict[str, str], channel: Channel
) -> None:
    """Issue 26: `rudder logs` shows the worker's own lines (checkpoints, speed, export),
    without the job's id repeated and without another job's lines."""
    import logging

    with session_scope() as session:
        user = repo.create_user(session, name="logs")
        spec = {**SPEC, "epochs": 1, "checkpoint": {"every_steps": 10, "keep_last": 2}}
        job_id = repo.create_job(session, owner_id=user.id, name="t", spec=spec,
                                 queue="cpu").id
    logging.getLogger("workers.runner").info("job %s is another job's", "0" * 32)
    assert run_job(job_id).result == "succeeded"
    lines = [e.data["message"] for e in channel.read_events(job_id) if e.type == "log"]
    assert any(line.startswith("checkpoint at step 10 ") for line in lines), lines
    assert any(line.startswith("trained ") and "steps/s" in line for line in lines), lines
    assert any(line.startswith("exported") for line in lines), lines
    assert not any(job_id in line or "another job" in line for line in lines), lines
