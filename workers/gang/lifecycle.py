"""A distributed job's delivery: rank 0 gathers a gang, every rank trains, any failure
ends the generation and the job goes back to the queue.

Rank 0 is the worker that got the job's own message and its lease (workers.lifecycle):
it opens a new generation in Redis, asks ``N - 1`` workers to join it, and waits. While
fewer have joined the job says "waiting for N workers (K online)"; a gang that does not
fill within ``gang_timeout_seconds`` lets its workers go and the job is queued again with
the reason, so no worker waits on a gang for ever. Gangs gathering on one queue stand in
submit order (workers.gang.waiting): one that has not filled gives way to an older one the
workers can fill, its worker taking a seat there, so two gangs that each hold part of the
workers never wait on each other. A full gang meets at the address rank
0 publishes (``engine.distributed.init``); the job runs; a failed collective (a rank
killed, stopped, unreachable) ends the generation on every rank, and rank 0 (or, if rank
0 died, the lease watchdog) queues the job to resume from its latest complete checkpoint
in a new generation.
"""

from __future__ import annotations

import logging
import socket
import time
import traceback
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import engine.distributed
from core import repositories as repo
from core.channel import Channel
from core.config import get_settings
from core.db import session_scope
from core.events import LogEvent, StatusEvent
from core.job_status import announce_status, transition_and_announce
from core.models import JobStatus
from core.queue import send_gang_joins
from engine.distributed import DistributedError, Rendezvous, RendezvousError
from engine.distributed.rendezvous import local_address_towards
from workers import heartbeat, lifecycle
from workers.db_retry import retry_db
from workers.gang.handler import NullIO
from workers.gang.runner import GangRunner
from workers.gang.seats import ABANDONED, GangSeats, Seat
from workers.gang.waiting import Gathering, WaitingRoom
from workers.lease import Lease
from workers.lifecycle import Outcome
from workers.resources import dispatch_now, get_store
from workers.runner import RunResult
from workers.settings import get_worker_settings

log = logging.getLogger(__name__)
_POLL_SECONDS = 0.1
_GIVE_WAY_AFTER_SECONDS = 1.0  # (at most a quarter of the gang timeout)
_LOOK_AHEAD_SECONDS = 0.5


def waiting_reason(size: int, online: int) -> str:
    return f"waiting for {size} workers ({online} online)"


@dataclass(frozen=True)
class _JobRow:
    status: str
    queue: str
    spec: dict[str, object]
    submitted: float  # unix seconds


def _job_row(job_id: str) -> _JobRow | None:
    def read() -> _JobRow | None:
        with session_scope() as session:
            job = repo.get_job(session, job_id=job_id)
            if job is None:
                return None
            created = job.created_at if job.created_at.tzinfo else \
                job.created_at.replace(tzinfo=UTC)  # SQLite hands back naive UTC
            return _JobRow(job.status, job.queue, dict(job.spec), created.timestamp())
    return retry_db(read, what=f"job {job_id}",
                    deadline_seconds=get_worker_settings().db_retry_seconds)


def _note_waiting(channel: Channel, job_id: str, reason: str) -> bool:
    """Say on the job why it waits; False when it is no longer queued (cancelled)."""
    with session_scope() as session:
        before = repo.get_job(session, job_id=job_id)
        changed = before is not None and before.status_reason != reason
        noted = repo.note_queued_reason(session, job_id=job_id, reason=reason)
    if noted and changed:
        announce_status(channel, job_id, StatusEvent(status=JobStatus.QUEUED.value,
                                                     reason=reason))
    return noted


def _requeue(channel: Channel, job_id: str, reason: str, *, attempt: bool) -> None:
    """Back into the queue (the outbox sends it); ``attempt`` counts it as a failed run."""
    def write() -> bool:
        with session_scope() as session:
            moved = transition_and_announce(session, channel, job_id=job_id,
                                            to_status=JobStatus.QUEUED,
                                            from_statuses=[JobStatus.QUEUED,
                                                           JobStatus.RUNNING],
                                            reason=reason)
            if moved and attempt:
                repo.increment_attempts(session, job_id=job_id)
                session.commit()
            return moved
    if retry_db(write, what=f"job {job_id} back to the queue",
                deadline_seconds=get_worker_settings().db_retry_seconds):
        dispatch_now()


def _gang_host() -> str:
    """The address the other ranks reach this worker at (the route towards Redis)."""
    configured = get_worker_settings().gang_host
    if configured:
        return configured
    url = urlparse(get_settings().redis_url or "")
    if not url.hostname or url.scheme == "unix":
        return "127.0.0.1"
    return local_address_towards(url.hostname, url.port or 6379)


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class _GaveUp:
    """Why rank 0 stopped gathering; ``join`` is the older gang it gave way to."""

    reason: str
    requeue: bool = False
    join: Gathering | None = None


def _gather(channel: Channel, seats: GangSeats, seat: Seat, lease: Lease,
            room: WaitingRoom) -> _GaveUp | None:
    """Wait for the gang to fill; None when it is full, else why it was given up."""
    settings = get_worker_settings()
    # Say why the last gang ended too: a job that waits again keeps telling its user.
    last_state, last_reason = seats.state(seat.generation - 1)
    before = f"; before: {last_reason}" if last_state == ABANDONED and last_reason else ""
    began = time.monotonic()
    deadline = began + settings.gang_timeout_seconds
    # a moment for the joins already asked for to arrive before giving way to anyone
    give_way_from = began + min(_GIVE_WAY_AFTER_SECONDS, settings.gang_timeout_seconds / 4)
    shown, looked, looked_ahead = -1, began, began
    while True:
        online = seats.joined(seat.generation)
        if online >= seat.size:
            return None
        now = time.monotonic()
        # (re)say what the job waits for, notice a cancel and renew the place in line (its
        # expiry is 5 s), at least once a second
        if online != shown or now - looked >= 1.0:
            shown, looked = online, now
            room.renew(seat)
            if not _note_waiting(channel, seat.job_id,
                                 waiting_reason(seat.size, online) + before):
                seats.fail(seat.generation, "the job left the queue")
                return _GaveUp("the job left the queue")
        if not lease.held:
            seats.fail(seat.generation, "rank 0 lost the job's lease")
            return _GaveUp("lost the job's lease")
        if now >= give_way_from and now - looked_ahead >= _LOOK_AHEAD_SECONDS:
            looked_ahead = now
            older = room.to_give_way_to(seat)
            if older is not None:
                reason = (f"gave way to job {older.job_id}, submitted earlier and also "
                          f"gathering {older.size} workers on the '{room.queue}' queue")
                if seats.abandon(seat.generation, reason):
                    return _GaveUp(reason + "; back in the queue", requeue=True, join=older)
                continue  # the last seat was taken just now: the gang is full
        if now > deadline:
            reason = (f"the gang of {seat.size} workers did not fill within "
                      f"{settings.gang_timeout_seconds:g} s ({online} online)")
            if seats.abandon(seat.generation, reason):
                return _GaveUp(reason + "; back in the queue", requeue=True)
            continue  # the last seat was taken just now: the gang is full
        time.sleep(_POLL_SECONDS)


def lead_gang(channel: Channel, job_id: str, spec: dict[str, object], lease: Lease) -> Outcome:
    """Rank 0's delivery of a distributed job (called holding the job's lease)."""
    settings = get_worker_settings()
    size = lifecycle.gang_size(spec)
    row = _job_row(job_id)
    if row is None:
        return Outcome(job_id, "skipped:no such job")
    seats = GangSeats(channel, job_id)
    seat = seats.open(size)
    room = WaitingRoom(channel, row.queue)
    room.enter(seat, row.submitted)
    try:
        send_gang_joins(get_settings().redis_url or "", job_id, queue=row.queue,
                        generation=seat.generation, count=size - 1)
        gave_up = _gather(channel, seats, seat, lease, room)
    finally:
        room.leave(seat)
    if gave_up is not None:
        if not gave_up.requeue:
            return Outcome(job_id, f"skipped:{gave_up.reason}")
        _requeue(channel, job_id, gave_up.reason, attempt=False)
        if gave_up.join is not None:
            log.info("job %s: %s", job_id, gave_up.reason)
            return Outcome(job_id, "requeued:gave way to an older gang",
                           then_join=(gave_up.join.job_id, gave_up.join.generation))
        return Outcome(job_id, "requeued:gang did not fill")
    host = _gang_host()
    port = _free_port(host)
    if not lifecycle._set_status(channel, job_id, JobStatus.RUNNING, None,
                                 [JobStatus.QUEUED, JobStatus.RUNNING]):
        seats.fail(seat.generation, "the job left the queue")
        return Outcome(job_id, "skipped:status changed")
    seats.start(seat.generation, f"{host}:{port}")
    heartbeat.training_as_rank(0, size)
    log.info("job %s: generation %d of %d ranks meets at %s:%d", job_id, seat.generation,
             size, host, port)
    try:
        engine.distributed.init(Rendezvous(0, size, host, port,
                                           timeout=settings.dist_timeout_seconds))
        result = lifecycle._train(channel, job_id, spec, lease, GangRunner,
                                  world=engine.distributed.current())
    except (DistributedError, RendezvousError) as exc:
        seats.fail(seat.generation, str(exc))
        reason = (f"a rank of generation {seat.generation} failed ({exc}); re-queued to "
                  f"resume from the latest checkpoint")
        log.error("job %s: %s", job_id, reason)
        if lease.held:
            channel.publish(job_id, LogEvent(level="warning", message=reason))
            _requeue(channel, job_id, reason, attempt=True)
        return Outcome(job_id, "requeued:a rank failed")
    finally:
        engine.distributed.shutdown()
    seats.fail(seat.generation, "over")
    if not isinstance(result, RunResult):
        return result
    if result.outcome == "rolled_back" and result.rollback is not None:
        # Rewind the record and storage, then start over as a new generation (every
        # rank must reload the checkpoint; the others have ended their run).
        rollback = result.rollback
        try:
            retry_db(lambda: lifecycle._rewind(channel, job_id, rollback.step,
                                               rollback.command_id),
                     what=f"job {job_id} rollback",
                     deadline_seconds=settings.db_retry_seconds)
        except Exception as exc:  # noqa: BLE001 - refused with the reason
            lifecycle._refuse(channel, job_id, rollback, f"{type(exc).__name__}: {exc}")
        _requeue(channel, job_id, f"rolled back to step {rollback.step}", attempt=False)
        return Outcome(job_id, "rolled_back")
    return lifecycle._report(channel, job_id, result)


def join_gang(channel: Channel, job_id: str, generation: int) -> Outcome:
    """A rank other than 0: take a seat in ``generation``, meet, train, leave."""
    settings = get_worker_settings()
    seats = GangSeats(channel, job_id)
    seat = seats.join(generation)
    if seat is None:
        state, _ = seats.state(generation)
        return Outcome(job_id, f"skipped:generation {generation} is {state or 'gone'}")
    address, why = seats.wait_address(generation, settings.gang_timeout_seconds + 30)
    if address is None:
        return Outcome(job_id, f"left:{why}")
    row = _job_row(job_id)
    if row is None:
        seats.fail(generation, "the job was deleted")
        return Outcome(job_id, "skipped:no such job")
    host, _, port = address.rpartition(":")
    heartbeat.training_as_rank(seat.rank, seat.size)
    log.info("job %s: rank %d of %d joins generation %d at %s", job_id, seat.rank, seat.size,
             generation, address)
    try:
        world = engine.distributed.init(Rendezvous(seat.rank, seat.size, host, int(port),
                                                   timeout=settings.dist_timeout_seconds))
        runner = GangRunner(job_id, row.spec, get_store(), NullIO(), world=world,
                            load_upload=lifecycle._load_upload,
                            lookup_dataset=lifecycle._lookup_dataset,
                            data_cache=Path(get_settings().home) / "cache",
                            pacing=settings.pacing())
        result: Any = runner.run()
    except (DistributedError, RendezvousError) as exc:
        seats.fail(generation, str(exc))
        log.error("job %s: rank %d leaves generation %d: %s", job_id, seat.rank, generation,
                  exc)
        return Outcome(job_id, "left:a rank failed")
    except Exception as exc:  # noqa: BLE001 - rank 0 sees the gang end and reports
        seats.fail(generation, f"rank {seat.rank}: {type(exc).__name__}: {exc}")
        log.error("job %s: rank %d failed: %s", job_id, seat.rank, traceback.format_exc())
        return Outcome(job_id, "failed")
    finally:
        engine.distributed.shutdown()
    return Outcome(job_id, f"rank {seat.rank}:{result.outcome}")
