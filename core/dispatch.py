"""The dispatcher: sends the outbox's jobs to the broker, and re-sends what the broker lost.

A queued job carries ``dispatch_pending`` on its row (core.repositories.outbox), written in
the statement that queued it; nothing else ever sends ``rudder.train``. The dispatcher
claims pending jobs, sends their messages and, when the broker refuses (Redis is down),
puts them back to try again on the next pass, for as long as it takes.

A message can also vanish after the broker took it: Redis restarted empty, or a worker
died holding it unacknowledged. When Redis restarted (its run_id changed, seen within a
poll), and every ``full_check_seconds`` anyway, the dispatcher compares the queued jobs it
sent against the messages the broker holds and the leases workers hold; a job missing
from both on two checks in a row (one check can fall between a worker popping the message
and taking the lease) goes back into the outbox and is sent again.

Runs in every api process (a thread, woken by each submit; it also looks for lost
messages) and in every worker's watchdog (sending only), so it works with any number of
either: claims are row-level compare-and-sets
(``FOR UPDATE SKIP LOCKED`` on PostgreSQL), and a duplicate message is harmless anyway
because the job lease lets one worker train a job at a time (workers/lifecycle.py).

>>> dispatcher = Dispatcher(sessions, channel, broker_url)  # doctest: +SKIP
>>> dispatcher.run_once()  # what a loop calls every second, or when woken
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta

from sqlalchemy.orm import Session, sessionmaker

from core import repositories as repo
from core.channel import Channel
from core.config import Settings
from core.db import session_scope
from core.models import utcnow
from core.queue import jobs_with_broker_message, send_training_batch

log = logging.getLogger("rudder.dispatch")

# A pass claims at most this many jobs per transaction, so a backlog of thousands after
# an outage is sent in bounded pipelines and each claim commits quickly.
CLAIM_BATCH = 200


class Dispatcher:
    """One process's view of the outbox; every method is safe to run concurrently with
    other processes' dispatchers."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        channel: Channel,
        broker_url: str,
        *,
        lost_after_seconds: float = 2.0,
        check_interval_seconds: float = 1.0,
        unacked_max_age_seconds: float = 10.0,
        full_check_seconds: float = 5.0,
    ) -> None:
        self._sessions = sessions
        self._channel = channel
        self._broker_url = broker_url
        self.lost_after = timedelta(seconds=lost_after_seconds)
        self.check_interval = check_interval_seconds
        self.unacked_max_age = unacked_max_age_seconds
        self.full_check_seconds = full_check_seconds
        self._postgres = sessions.kw["bind"].dialect.name == "postgresql"
        self._suspects: set[str] = set()
        self._last_check = 0.0
        self._last_full_check = float("-inf")
        self._broker_run_id: str | None = None
        self._watch_until = float("-inf")
        self._lock = threading.Lock()  # one pass at a time in this process

    def send_pending(self) -> list[str]:
        """Send every pending job; returns the ids the broker took. A refused batch goes
        back into the outbox and the exception propagates (the caller retries later)."""
        sent: list[str] = []
        while True:
            with session_scope(self._sessions) as session:
                if self._postgres:
                    # The claim is one statement; BEGIN and COMMIT would double its cost.
                    session.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
                batch = repo.claim_jobs_to_dispatch(session, limit=CLAIM_BATCH)
            if not batch:
                return sent
            try:
                send_training_batch(self._broker_url, batch)
            except BaseException:
                with session_scope(self._sessions) as session:
                    repo.return_to_outbox(session, job_ids=[job_id for job_id, _ in batch])
                raise
            sent.extend(job_id for job_id, _ in batch)

    def requeue_lost(self) -> list[str]:
        """Put back into the outbox the queued jobs whose message the broker no longer
        holds (seen missing on this check and the previous one); returns their ids."""
        cutoff = utcnow() - self.lost_after
        with session_scope(self._sessions) as session:
            sent = repo.queued_jobs_sent_before(session, cutoff=cutoff)
        if not sent:
            self._suspects = set()
            return []
        held = jobs_with_broker_message(
            self._channel.client, unacked_max_age_seconds=self.unacked_max_age
        )
        unaccounted = [job_id for job_id in sent if job_id not in held]
        leased = self._channel.leased_jobs(unaccounted)
        missing = {job_id for job_id in unaccounted if job_id not in leased}
        confirmed, self._suspects = missing & self._suspects, missing - self._suspects
        requeued: list[str] = []
        # one transaction for them all: after a Redis restart every queued job may be here
        with session_scope(self._sessions) as session:
            for job_id in sorted(confirmed):
                if repo.put_back_in_outbox(session, job_id=job_id, sent_before=cutoff):
                    requeued.append(job_id)
        if requeued:
            log.warning("the broker lost the message of %d queued job(s); sending again: %s",
                        len(requeued), ", ".join(requeued[:10]))
        return requeued

    def lost_check_due(self, now: float) -> bool:
        """Whether to look for lost messages now: Redis restarted since the last look, a
        suspicion waits for confirmation, or ``full_check_seconds`` passed."""
        run_id = self._channel.server_run_id()
        if run_id != self._broker_run_id:
            self._broker_run_id = run_id
            # Keep looking for a while: a job sent just before the restart only counts
            # once it is ``lost_after`` old, and is confirmed on the check after that.
            self._watch_until = now + self.lost_after.total_seconds() + 3 * self.check_interval
        return (now <= self._watch_until or bool(self._suspects)
                or now - self._last_full_check >= self.full_check_seconds)

    def run_once(self, *, check_lost: bool | None = None) -> list[str]:
        """One pass: send what is pending and, when due (at most once per
        ``check_interval``), look for lost messages and send those too. Returns the ids
        sent."""
        with self._lock:
            now = time.monotonic()
            if check_lost is None:
                check_lost = False
                if now - self._last_check >= self.check_interval:
                    self._last_check = now
                    check_lost = self.lost_check_due(now)
            sent = self.send_pending()
            if check_lost:
                self._last_full_check = now
                if self.requeue_lost():
                    sent += self.send_pending()
            return sent


def dispatcher_for(settings: Settings, sessions: sessionmaker[Session],
                   channel: Channel) -> Dispatcher:
    """A dispatcher on ``settings``' broker (its Redis) with its tuning."""
    if not settings.redis_url:
        raise ValueError("dispatching needs a broker: RUDDER_REDIS_URL is not set")
    tuning = settings.dispatch
    return Dispatcher(sessions, channel, settings.redis_url,
                      lost_after_seconds=tuning.lost_after_seconds,
                      check_interval_seconds=tuning.poll_seconds,
                      unacked_max_age_seconds=tuning.unacked_max_age_seconds,
                      full_check_seconds=tuning.full_check_seconds)


class DispatcherThread:
    """Runs :meth:`Dispatcher.run_once` every ``poll_seconds``, and soon after
    :meth:`wake` (a submit committed), gathering the wake-ups of ``coalesce_seconds`` into
    one pass: one claim and one pipeline for a burst of submits instead of one each."""

    def __init__(self, dispatcher: Dispatcher, *, poll_seconds: float = 1.0,
                 coalesce_seconds: float = 0.05,
                 on_failure: Callable[[], None] | None = None) -> None:
        self.dispatcher = dispatcher
        self.on_failure = on_failure
        self.poll_seconds = poll_seconds
        self.coalesce_seconds = coalesce_seconds
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._failing = False
        self._thread = threading.Thread(target=self._run, name="rudder-dispatch", daemon=True)

    def start(self) -> DispatcherThread:
        self._thread.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def close(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.ident is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._wake.wait(self.poll_seconds) and self.coalesce_seconds > 0:
                time.sleep(self.coalesce_seconds)
            self._wake.clear()
            self.pass_logging_failures()
        # A last pass so what was committed just before shutdown is not left to others.
        self.pass_logging_failures()

    def pass_logging_failures(self) -> None:
        try:
            self.dispatcher.run_once()
        except Exception:  # noqa: BLE001 - the broker or DB is down: retry next pass
            if self.on_failure is not None:
                self.on_failure()
            if not self._failing:  # once per outage, not once a second
                log.warning("dispatch failed; retrying every %.1fs until it works",
                            self.poll_seconds, exc_info=True)
            self._failing = True
        else:
            if self._failing:
                log.warning("dispatch works again")
            self._failing = False
