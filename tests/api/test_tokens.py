"""Issue 14, tokens: list and revoke one's own (GET/DELETE /v1/tokens), optional expiry,
and a revocation that every api process honours at once (through Redis), or within the
token cache's ttl while Redis is down."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import timedelta

import httpx

from core.channel import TOKEN_REVOCATIONS
from core.config import Settings
from core.tokens import issue_token
from tests.conftest import ApiHarness, serve
from tests.restartable_redis import RedisProcess
from tests.services import wait_until


def _token_of(headers: dict[str, str]) -> str:
    return headers["Authorization"].split(" ", 1)[1]


def _new_token(api: ApiHarness, user: str, *, label: str = "",
               expires_in: timedelta | None = None) -> dict[str, str]:
    _, token = issue_token(user, label=label, factory=api.sessions,
                           secret=api.settings.secret_key.get_secret_value(),
                           expires_in=expires_in)
    return {"Authorization": f"Bearer {token}"}


def _wait_for_status(client: httpx.Client, headers: dict[str, str], status: int,
                     within: float) -> float:
    """Seconds until ``GET /v1/jobs`` answers ``status`` (fails after ``within``)."""
    started = time.monotonic()
    while True:
        answer = client.get("/v1/jobs", headers=headers).status_code
        elapsed = time.monotonic() - started
        if answer == status:
            return elapsed
        assert elapsed < within, f"still {answer} after {elapsed:.1f} s"
        time.sleep(0.02)


def test_a_user_lists_their_own_tokens_and_sees_which_one_is_in_use(api: ApiHarness) -> None:
    owner = f"token-owner-{uuid.uuid4().hex[:8]}"
    _, first = api.make_user(owner)
    second = _new_token(api, owner, label="laptop", expires_in=timedelta(days=30))
    _, stranger = api.make_user()
    listed = api.client.get("/v1/tokens", headers=second)
    assert listed.status_code == 200
    rows = listed.json()["data"]
    assert len(rows) == 2
    newest, oldest = rows
    assert newest["label"] == "laptop" and newest["current"] is True
    assert newest["status"] == "active" and newest["expires_at"] is not None
    assert oldest["current"] is False and oldest["expires_at"] is None
    assert _token_of(first).startswith(oldest["prefix"])
    assert "token_hash" not in newest and not any(_token_of(first) in str(v)
                                                 for v in oldest.values())
    # another user's token ids are not theirs to see or revoke
    theirs = api.client.get("/v1/tokens", headers=stranger).json()["data"]
    assert [t["id"] for t in theirs] != [t["id"] for t in rows] and len(theirs) == 1
    gone = api.client.delete(f"/v1/tokens/{theirs[0]['id']}", headers=first)
    assert gone.status_code == 404
    assert api.client.get("/v1/jobs", headers=stranger).status_code == 200
    for bad in ("abc%00def", "not-an-id", "00000000-0000-0000-0000-000000000000"):
        response = api.client.delete(f"/v1/tokens/{bad}", headers=first)
        assert response.status_code == 404, response.text
        assert response.json()["error"]["code"] == "not_found"


def test_a_revoked_token_stops_working_at_once_and_is_listed_as_revoked(
    make_settings: Callable[..., Settings]
) -> None:
    # A long cache ttl: only the revocation itself can make the token stop working.
    with serve(make_settings(auth_cache_seconds=60)) as api:
        owner = f"revoker-{uuid.uuid4().hex[:8]}"
        _, keep = api.make_user(owner)
        doomed = _new_token(api, owner, label="old")
        assert api.client.get("/v1/jobs", headers=doomed).status_code == 200  # now cached
        doomed_id = next(t["id"] for t in api.client.get("/v1/tokens", headers=doomed)
                         .json()["data"] if t["current"])
        assert api.client.delete(f"/v1/tokens/{doomed_id}", headers=keep).status_code == 204
        response = api.client.get("/v1/jobs", headers=doomed)
        assert response.status_code == 401
        assert "revoked" in response.json()["error"]["message"]
        rows = {t["id"]: t for t in api.client.get("/v1/tokens", headers=keep).json()["data"]}
        assert rows[doomed_id]["status"] == "revoked" and rows[doomed_id]["revoked_at"]
        # again is a no-op; revoking the token in use works and ends it too
        assert api.client.delete(f"/v1/tokens/{doomed_id}", headers=keep).status_code == 204
        keep_id = next(t["id"] for t in rows.values() if t["current"])
        assert api.client.delete(f"/v1/tokens/{keep_id}", headers=keep).status_code == 204
        assert api.client.get("/v1/tokens", headers=keep).status_code == 401


def test_revocation_reaches_every_api_process_at_once(
    make_settings: Callable[..., Settings]
) -> None:
    settings = make_settings(auth_cache_seconds=60)
    with serve(settings) as first, serve(settings) as second:
        _, doomed = first.make_user()
        for api in (first, second):
            assert api.client.get("/v1/jobs", headers=doomed).status_code == 200  # cached
        token_id = first.client.get("/v1/tokens", headers=doomed).json()["data"][0]["id"]
        assert first.client.delete(f"/v1/tokens/{token_id}", headers=doomed).status_code == 204
        # the other process hears of it through Redis: well under its 60 s cache ttl
        assert _wait_for_status(second.client, doomed, 401, within=1.0) < 1.0


def test_with_redis_down_revocation_still_works_and_other_processes_follow_within_the_ttl(
    make_settings: Callable[..., Settings], private_redis: RedisProcess
) -> None:
    ttl = 2.0
    settings = make_settings(redis_url=private_redis.url, auth_cache_seconds=ttl)
    with serve(settings) as first, serve(settings) as second:
        _, owner = first.make_user()
        token_id = first.client.get("/v1/tokens", headers=owner).json()["data"][0]["id"]
        private_redis.kill()
        assert second.client.get("/v1/jobs", headers=owner).status_code == 200  # cached
        revoked = first.client.delete(f"/v1/tokens/{token_id}", headers=owner)
        assert revoked.status_code == 204  # the database is the record; Redis only tells
        assert first.client.get("/v1/jobs", headers=owner).status_code == 401
        assert _wait_for_status(second.client, owner, 401, within=ttl + 1.5) <= ttl + 1.5


def test_after_a_redis_restart_every_process_follows_revocations_again(
    make_settings: Callable[..., Settings], private_redis: RedisProcess
) -> None:
    settings = make_settings(redis_url=private_redis.url, auth_cache_seconds=60)
    with serve(settings) as first, serve(settings) as second:
        _, during = first.make_user()
        _, after = first.make_user()
        ids = [first.client.get("/v1/tokens", headers=h).json()["data"][0]["id"]
               for h in (during, after)]
        for headers in (during, after):
            assert second.client.get("/v1/jobs", headers=headers).status_code == 200  # cached
        private_redis.kill()
        # revoked while Redis is down: nobody hears of it ...
        assert first.client.delete(f"/v1/tokens/{ids[0]}", headers=during).status_code == 204
        # (down long enough for a client's own retries to run out and back off)
        time.sleep(3)
        private_redis.restart()
        # ... but each process subscribes again within its 1 s retry interval (not after a
        # backoff of many seconds) and forgets what it cached meanwhile
        wait_until(lambda: private_redis.subscribers(TOKEN_REVOCATIONS) == 2, 10,
                   what="two api processes to subscribe again")
        # (the subscription counts on the server a moment before the process reads it)
        assert _wait_for_status(second.client, during, 401, within=1.0) < 1.0
        assert second.client.get("/v1/jobs", headers=after).status_code == 200  # cached again
        assert first.client.delete(f"/v1/tokens/{ids[1]}", headers=after).status_code == 204
        assert _wait_for_status(second.client, after, 401, within=1.0) < 1.0


def test_an_expired_token_is_refused_even_while_cached(
    make_settings: Callable[..., Settings]
) -> None:
    with serve(make_settings(auth_cache_seconds=60)) as api:
        owner = f"expiring-{uuid.uuid4().hex[:8]}"
        _, keep = api.make_user(owner)
        short = _new_token(api, owner, expires_in=timedelta(seconds=1))
        assert api.client.get("/v1/jobs", headers=short).status_code == 200
        time.sleep(1.2)
        response = api.client.get("/v1/jobs", headers=short)
        assert response.status_code == 401
        assert "expired" in response.json()["error"]["message"]
        rows = api.client.get("/v1/tokens", headers=keep).json()["data"]
        assert [t["status"] for t in rows] == ["expired", "active"]


def test_the_revocation_follower_outlives_any_error_a_reconnect_raises() -> None:
    """After a Redis restart, uvloop raised a RuntimeError ("the handler is closed") from
    redis-py's reconnect: not a RedisError. The follower must log it, subscribe again and
    go on evicting (it ended instead, and the process ignored revocations until restarted).
    The transport race cannot be made on demand with a real Redis, so a stand-in channel
    raises it on the first subscription."""
    import asyncio
    import types

    from api.state import ServiceState, TokenCache
    from api.streams import OpenStreams

    class Recording(TokenCache):
        def __init__(self) -> None:
            super().__init__()
            self.evicted: list[str] = []

        def evict(self, token_hash: str) -> None:
            self.evicted.append(token_hash)
            super().evict(token_hash)

    class FlakyChannel:
        def __init__(self) -> None:
            self.subscriptions = 0

        async def token_revocations(self):  # type: ignore[no-untyped-def]
            self.subscriptions += 1
            if self.subscriptions == 1:
                raise RuntimeError("unable to perform operation: the handler is closed")
            yield None  # subscribed again
            yield "revoked-hash"
            await asyncio.Event().wait()

    async def scenario() -> tuple[int, list[str]]:
        cache, channel = Recording(), FlakyChannel()
        state = types.SimpleNamespace(token_cache=cache, streams=OpenStreams())
        task = asyncio.create_task(ServiceState.follow_token_revocations(
            state, channel, retry_seconds=0.01))  # type: ignore[arg-type]
        for _ in range(200):
            await asyncio.sleep(0.01)
            if cache.evicted:
                break
        assert not task.done(), "the follower ended"
        task.cancel()
        return channel.subscriptions, cache.evicted

    subscriptions, evicted = asyncio.run(scenario())
    assert subscriptions == 2 and evicted == ["revoked-hash"]
