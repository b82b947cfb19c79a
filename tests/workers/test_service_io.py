from __future__ import annotations

import time

from core import repositories as repo
from core.channel import Channel
from core.db import session_scope
from core.events import (
    CancelCommand,
    MetricEvent,
    PauseCommand,
    SetLRCommand,
)
from core.models import LRChangeMode
from tests.services import wait_until
from tests.workers.jobs import idle_steering, lr_outcome, stored_job
from workers.service_io import ControlListener, ServiceIO


def _job_and_user() -> tuple[str, str]:
    return stored_job("io-user")


def test_commands_reach_the_loop_without_blocking_it(worker_env: dict[str, str],
                                                     channel: Channel) -> None:
    job_id, _ = _job_and_user()
    channel.send_command(job_id, PauseCommand(requested_by="x"))  # before start: not ours
    listener = ControlListener(channel, job_id, after=channel.last_command_id(job_id))
    listener.start()
    try:
        started = time.perf_counter()
        assert listener.drain() == []
        assert time.perf_counter() - started < 0.01  # the loop never waits on Redis
        assert not listener.wake.is_set()  # the loop's one per-step check stays quiet
        channel.send_command(job_id, SetLRCommand(command_id="c1", learning_rate=0.5,
                                                  mode="override"))
        channel.send_command(job_id, CancelCommand(requested_by="x"))
        assert listener.wake.wait(5), "a command must wake the loop"
        commands: list = []
        wait_until(lambda: commands.extend(listener.drain()) or len(commands) == 2, 5,
                   what="commands")
    finally:
        listener.stop()
    assert commands == [SetLRCommand(command_id="c1", learning_rate=0.5, mode="override"),
                        CancelCommand(command_id=commands[1].command_id, requested_by="x")]


def test_events_metrics_and_lr_confirmation_are_written(worker_env: dict[str, str],
                                                        channel: Channel) -> None:
    job_id, user_id = _job_and_user()
    with session_scope() as session:
        change = repo.create_lr_change(session, job_id=job_id, requested_lr=0.01,
                                       mode=LRChangeMode.SCALE, requested_by=user_id)
        change_id = change.id
    listener = ControlListener(channel, job_id)
    io = ServiceIO(channel, job_id, still_owner=lambda: True, listener=listener)
    io.publish(MetricEvent(step=10, epoch=0, epochs_done=0, time=time.time(),
                           values={"train_loss": 1.5, "lr": 0.02}))
    io.record_metrics(10, 0, {"train_loss": 1.5, "lr": 0.02})
    io.record_progress(10, 0, 0.02, {"train_loss": 1.5})
    io.command_done(lr_outcome(change_id, 0.01, step=11))
    io.close()
    events = channel.read_events(job_id)
    assert [e.type for e in events] == ["metric", "lr"]
    assert events[1].data["change_id"] == change_id and events[1].data["applied_step"] == 11
    with session_scope() as session:
        points = repo.list_metric_points(session, job_id=job_id)
        assert {(p.name, p.step, p.value) for p in points} == {("train_loss", 10, 1.5),
                                                               ("lr", 10, 0.02)}
        stored = repo.get_lr_change(session, change_id=change_id)
        assert stored is not None
        assert (stored.status, stored.applied_step, stored.applied_lr) == ("applied", 11, 0.01)
        job = repo.get_job(session, job_id=job_id)
        assert job is not None and (job.step, job.current_lr) == (10, 0.01)


def test_fenced_worker_writes_nothing(worker_env: dict[str, str], channel: Channel) -> None:
    job_id, _ = _job_and_user()
    io = ServiceIO(channel, job_id, still_owner=lambda: False,
                   listener=ControlListener(channel, job_id))
    io.publish(MetricEvent(step=1, epoch=0, epochs_done=0, time=0.0, values={"lr": 0.1}))
    io.record_metrics(1, 0, {"lr": 0.1})
    io.close()
    assert channel.read_events(job_id) == []
    with session_scope() as session:
        assert repo.list_metric_points(session, job_id=job_id) == []


def test_a_command_stops_the_loop_at_the_very_next_step(worker_env: dict[str, str],
                                                        channel: Channel) -> None:
    """Nothing is due for a thousand steps (no metrics, no checkpoint), yet a pause sent
    mid-run takes effect at the next step boundary: the listener's wake flag is what the
    loop checks each step."""
    from workers.hooks import STOP_PAUSE, LoopState, Pacing, ServiceHandler

    job_id, _ = _job_and_user()
    listener = ControlListener(channel, job_id, after=channel.last_command_id(job_id))
    listener.start()
    io = ServiceIO(channel, job_id, still_owner=lambda: True, listener=listener)
    state = LoopState()
    handler = ServiceHandler(io, state, steering=idle_steering(),
                             save_checkpoint=lambda reason, wait=False: True,
                             current_lr=lambda: 0.1, checkpoint_every=0,
                             pacing=Pacing(log_every=1000))
    try:
        handler.train_begin(None)
        assert not any(handler.batch_end(None) for _ in range(5))
        command_id = channel.send_command(job_id, PauseCommand(requested_by="x"))
        assert listener.wake.wait(5)
        assert handler.batch_end(None) is True  # step 6: stopped right there
    finally:
        io.close()
        listener.stop()
    assert (state.step, state.stop_reason, state.stop_command_id) == (6, STOP_PAUSE,
                                                                       command_id)


def test_a_rejected_lr_change_is_an_lr_event_and_a_row_with_its_reason(
    worker_env: dict[str, str], channel: Channel
) -> None:
    """Issue 15: a rejection is a first-class ``lr`` event (not only a log line)."""
    job_id, user_id = _job_and_user()
    with session_scope() as session:
        change_id = repo.create_lr_change(session, job_id=job_id, requested_lr=0.5,
                                          mode=LRChangeMode.SCALE, requested_by=user_id).id
    io = ServiceIO(channel, job_id, still_owner=lambda: True,
                   listener=ControlListener(channel, job_id))
    reason = "cannot scale a schedule whose current learning rate is 0.0"
    io.command_done(lr_outcome(change_id, 0.5, reason=reason))
    io.close()
    [event] = channel.read_events(job_id)
    assert (event.type, event.data) == ("lr", {
        "change_id": change_id, "status": "rejected", "learning_rate": 0.5, "mode": "scale",
        "applied_step": None, "applied_at": None, "reason": reason,
    })
    with session_scope() as session:
        stored = repo.get_lr_change(session, change_id=change_id)
        assert stored is not None and (stored.status, stored.reason) == ("rejected", reason)


def test_a_malformed_control_entry_is_skipped_not_replayed_forever(
    worker_env: dict[str, str], channel: Channel
) -> None:
    from core.channel import control_key

    job_id, _ = _job_and_user()
    listener = ControlListener(channel, job_id, after=channel.last_command_id(job_id))
    listener.start()
    try:
        channel.client.xadd(control_key(job_id), {"type": "explode", "command_id": "x"})
        channel.send_command(job_id, PauseCommand(command_id="p"))
        assert listener.wake.wait(5)
        commands: list = []
        wait_until(lambda: commands.extend(listener.drain()) or len(commands) >= 1, 5,
                   what="the pause")
        time.sleep(0.3)  # a listener stuck on the bad entry would deliver the pause again
        commands.extend(listener.drain())
    finally:
        listener.stop()
    assert [c.command_id for c in commands] == ["p"]
