"""Refuse oversized request bodies (413) before they are read into memory.

Starlette's own limiter answers in plain text, so this pure ASGI middleware does it
with the standard error body: it checks Content-Length up front, counts the bytes of
bodies without one (chunked uploads), and once a body went over the limit it replaces
whatever the app tries to answer (the body parser turns the aborted read into a 400)
with the 413.
"""

from __future__ import annotations

import json
import re

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

UPLOAD_PATHS = ("/v1/datasets", "/v1/models")
# PUT /v1/datasets/uploads/{id}/parts/{n}: bounded by the part size, not the upload's.
PART_PATH = re.compile(r"^/v1/datasets/uploads/[^/]+/parts/[^/]+$")


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int):
        super().__init__(413, f"request body exceeds the limit of {limit} bytes")


class BodySizeLimit:
    def __init__(
        self, app: ASGIApp, *, max_body_bytes: int, max_upload_bytes: int,
        max_part_bytes: int | None = None,
    ):
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_upload_bytes = max_upload_bytes
        self.max_part_bytes = max_part_bytes or max_upload_bytes

    def _limit(self, path: str) -> int:
        if PART_PATH.match(path):
            return self.max_part_bytes
        return self.max_upload_bytes if path.startswith(UPLOAD_PATHS) else self.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        limit = self._limit(scope["path"])
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _send_413(send, limit)
            return
        received = 0
        exceeded = False
        replaced = False

        async def counting_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    exceeded = True
                    raise BodyTooLarge(limit)
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal replaced
            if not exceeded:
                await send(message)
            elif not replaced:
                replaced = True
                await _send_413(send, limit)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not exceeded:
                raise
            if not replaced:
                await _send_413(send, limit)


async def _send_413(send: Send, limit: int) -> None:
    body = json.dumps(
        {
            "error": {
                "code": "payload_too_large",
                "message": f"request body exceeds the limit of {limit} bytes",
                "details": {"limit_bytes": limit},
            }
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
