"""Workers as the System view shows them: their latest heartbeats and the queues."""

from __future__ import annotations

import bisect
import time
from datetime import UTC, datetime
from itertools import accumulate

from sqlalchemy.orm import Session

from api.schemas.workers import (
    QueuePublic,
    WorkerHistoryPublic,
    WorkerPublic,
    WorkerSamplePublic,
    WorkersHistoryPublic,
    WorkersPublic,
)
from core import repositories
from core.channel import Channel
from core.models import User
from core.queue import QUEUES


def describe(channel: Channel, session: Session, *, user: User) -> WorkersPublic:
    """Another user's job is shown only as "busy": job ids are not shared across users."""
    now = time.time()
    beats = channel.worker_heartbeats()
    mine = {
        beat.current_job_id for beat in beats if beat.current_job_id is not None
        and repositories.get_job(session, job_id=beat.current_job_id, owner_id=user.id)
    }
    workers = [
        WorkerPublic(
            worker_id=beat.worker_id, hostname=beat.hostname, queues=beat.queues,
            busy=beat.current_job_id is not None,
            current_job_id=beat.current_job_id if beat.current_job_id in mine else None,
            rank=beat.rank if beat.current_job_id in mine else None,
            ranks=beat.ranks if beat.current_job_id in mine else None,
            cpu_percent=beat.cpu_percent,
            memory_used_bytes=beat.memory_used_bytes,
            memory_total_bytes=beat.memory_total_bytes, gpus=beat.gpus,
            seconds_since_seen=max(0.0, round(now - beat.time, 1)),
        )
        for beat in beats
    ]
    lengths = channel.queue_lengths(list(QUEUES))
    return WorkersPublic(
        workers=workers, queues=[QueuePublic(name=n, waiting=w) for n, w in lengths.items()]
    )


class _StepClock:
    """Where a job stood (its furthest reported step) at a moment, from its metric times."""

    def __init__(self, points: list[tuple[datetime, int]]):
        ordered = sorted((_seconds(t), step) for t, step in points)
        self.times = [t for t, _ in ordered]
        self.furthest = list(accumulate((step for _, step in ordered), max))

    def step_at(self, moment: float) -> int | None:
        at = bisect.bisect_right(self.times, moment)
        return self.furthest[at - 1] if at else None


def _seconds(moment: datetime) -> float:
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def history(channel: Channel, session: Session, *, minutes: int) -> WorkersHistoryPublic:
    """CPU, memory and pace per worker over the last ``minutes``, from the heartbeats the
    channel keeps. The pace is the worker's job's progress between two heartbeats."""
    since = time.time() - minutes * 60
    beats = channel.worker_history(since_s=since)
    clocks: dict[str, _StepClock] = {}
    for job_id in {b.current_job_id for b in beats if b.current_job_id is not None}:
        clocks[job_id] = _StepClock(repositories.step_times_since(
            session, job_id=job_id, since=datetime.fromtimestamp(since - 60, UTC)))
    workers: dict[str, WorkerHistoryPublic] = {}
    previous: dict[str, tuple[float, str | None]] = {}
    for beat in beats:
        pace = None
        before = previous.get(beat.worker_id)
        job = beat.current_job_id
        if job is not None and before is not None and before[1] == job and beat.time > before[0]:
            start, end = clocks[job].step_at(before[0]), clocks[job].step_at(beat.time)
            if start is not None and end is not None:
                pace = round(max(0, end - start) / (beat.time - before[0]), 3)
        previous[beat.worker_id] = (beat.time, job)
        worker = workers.setdefault(beat.worker_id, WorkerHistoryPublic(
            worker_id=beat.worker_id, hostname=beat.hostname, samples=[]))
        worker.samples.append(WorkerSamplePublic(
            time=beat.time, cpu_percent=beat.cpu_percent,
            memory_used_bytes=beat.memory_used_bytes,
            memory_total_bytes=beat.memory_total_bytes, busy=job is not None,
            steps_per_second=pace))
    return WorkersHistoryPublic(since=since, workers=sorted(workers.values(),
                                                            key=lambda w: w.worker_id))
