"""JSON bodies must be UTF-8 without a byte order mark (RFC 8259 section 8.1).

Python's ``json.loads`` guesses UTF-16 and UTF-32 from a body's first bytes and skips a
UTF-8 BOM, so such bodies used to be accepted silently. This pure ASGI middleware looks
at the first four bytes of a JSON (or untyped) request body, and at its ``charset``, and
refuses what is not plain UTF-8 with the standard error body naming the encoding: 415
``unsupported_media_type`` for UTF-16/32 or another charset, 400 ``malformed_json`` for a
UTF-8 byte order mark. The bytes it read are handed on unchanged otherwise.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.limits import PART_PATH

BODY_METHODS = ("POST", "PUT", "PATCH", "DELETE")
# (prefix, encoding) by what a body starts with: byte order marks first, then the
# patterns of NULs that ASCII JSON text makes in UTF-16/32 (RFC 4627 section 3).
_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x00\x00\xfe\xff", "UTF-32 (big-endian, with a byte order mark)"),
    (b"\xff\xfe\x00\x00", "UTF-32 (little-endian, with a byte order mark)"),
    (b"\xfe\xff", "UTF-16 (big-endian, with a byte order mark)"),
    (b"\xff\xfe", "UTF-16 (little-endian, with a byte order mark)"),
)


def body_encoding(head: bytes) -> str | None:
    """The non-UTF-8 encoding a JSON body's first four bytes show, else None."""
    for prefix, name in _SIGNATURES:
        if head.startswith(prefix):
            return name
    if len(head) >= 4:
        nuls = (head[0] == 0, head[1] == 0, head[2] == 0, head[3] == 0)
        return {
            (True, True, True, False): "UTF-32 (big-endian)",
            (False, True, True, True): "UTF-32 (little-endian)",
            (True, False, True, False): "UTF-16 (big-endian)",
            (False, True, False, True): "UTF-16 (little-endian)",
        }.get(nuls)
    return None


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media in ("", "application/json") or media.endswith("+json")


def _charset(content_type: str) -> str | None:
    for parameter in content_type.split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"').lower()
    return None


class Utf8Json:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # An upload's part is raw bytes, whatever they start with.
        if (scope["type"] != "http" or scope["method"] not in BODY_METHODS
                or PART_PATH.match(scope["path"])):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        content_type = headers.get(b"content-type", b"").decode("latin-1")
        if not _is_json(content_type):
            await self.app(scope, receive, send)
            return
        charset = _charset(content_type)
        if charset not in (None, "utf-8", "utf8"):
            await _refuse(send, 415, "unsupported_media_type",
                          f"the Content-Type says charset={charset}; JSON bodies must be "
                          "UTF-8 (RFC 8259)", charset)
            return
        held: list[Message] = []
        head = b""
        while len(head) < 4:
            message = await receive()
            held.append(message)
            if message["type"] != "http.request":
                break
            head += message.get("body", b"")
            if not message.get("more_body", False):
                break
        encoding = body_encoding(head)
        if encoding is not None:
            await _refuse(send, 415, "unsupported_media_type",
                          f"the request body is {encoding}; JSON bodies must be UTF-8 "
                          "(RFC 8259)", encoding)
            return
        if head.startswith(b"\xef\xbb\xbf"):
            await _refuse(send, 400, "malformed_json",
                          "the request body starts with a UTF-8 byte order mark; send JSON "
                          "as UTF-8 without one (RFC 8259)", "UTF-8 with a byte order mark")
            return

        async def replay() -> Message:
            return held.pop(0) if held else await receive()

        await self.app(scope, replay, send)


async def _refuse(send: Send, status: int, code: str, message: str, encoding: str) -> None:
    body = json.dumps({"error": {"code": code, "message": message,
                                 "details": {"encoding": encoding}}}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]})
    await send({"type": "http.response.body", "body": body})
