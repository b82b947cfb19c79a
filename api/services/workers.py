"""Workers as the System view shows them: their latest heartbeats and the queues."""

from __future__ import annotations

import time

from sqlalchemy.orm import Session

from api.schemas.workers import QueuePublic, WorkerPublic, WorkersPublic
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
