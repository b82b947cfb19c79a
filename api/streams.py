"""The event streams an api process is serving, by the token that opened them, so that a
token's revocation ends them (issue 25 item 9: a stream opened before the revocation
went on delivering for up to its 300 s lifetime).

A revocation reaches every api process through Redis (ServiceState follows
``rudder:tokens:revoked``) and ends that token's streams within the round trip; the
revoking process ends its own at once. While Redis cannot tell, each process checks the
tokens of its open streams against the database every ``auth_cache_seconds``, the same
bound a cached token has.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager


class OpenStreams:
    """Open streams by token hash; ``end(hash)`` tells each of them to close."""

    def __init__(self) -> None:
        self._by_token: dict[str, set[asyncio.Event]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The event loop the streams run on (for ``end_threadsafe``)."""
        self._loop = loop

    @contextmanager
    def watch(self, token_hash: str | None) -> Iterator[asyncio.Event]:
        """An event set when the stream opened with ``token_hash`` must end. (With auth
        off there is no token: nothing ends the stream but its lifetime.)"""
        ended = asyncio.Event()
        if token_hash is None:
            yield ended
            return
        self._by_token.setdefault(token_hash, set()).add(ended)
        try:
            yield ended
        finally:
            watching = self._by_token.get(token_hash, set())
            watching.discard(ended)
            if not watching:
                self._by_token.pop(token_hash, None)

    def tokens(self) -> list[str]:
        return list(self._by_token)

    def end(self, token_hash: str) -> None:
        """End the token's streams (call on the event loop)."""
        for ended in self._by_token.get(token_hash, set()):
            ended.set()

    def end_threadsafe(self, token_hash: str) -> None:
        """``end`` from a worker thread (a sync route)."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.end, token_hash)
