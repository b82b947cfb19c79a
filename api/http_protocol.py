"""Requests uvicorn's HTTP parser refuses before the app sees them, answered in the API's
error shape.

A control character in a header value (``Idempotency-Key: a\\x01b``) is refused by the
parser (httptools, as RFC 9110 requires) while the request is still being read: the app
never runs, and uvicorn answered a plain-text "Invalid HTTP request received." That
cannot move into the app (the header never reaches it, and accepting such values would
be wrong), but the answer can be ours: this protocol class writes the standard error
body, naming the header when the refused bytes show which one. Serve the API with
``uvicorn --http api.http_protocol:ApiHttpProtocol`` (``rudder up``, docker compose and
the tests do); with another ``--http`` the parser's plain-text 400 comes back.
"""

from __future__ import annotations

import json
import re
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HTTP_PROTOCOL = "api.http_protocol:ApiHttpProtocol"
# A header line and a value byte RFC 9110 forbids (controls other than tab, and DEL).
_HEADER_LINE = re.compile(rb"\r?\n([!#$%&'*+.^_`|~0-9A-Za-z-]+):([^\r\n]*)")
_CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]")


def describe_refusal(received: bytes) -> tuple[str, list[dict[str, str]] | None]:
    """(message, details) for a request the parser refused, from its bytes."""
    for match in _HEADER_LINE.finditer(received):
        found = _CONTROL.search(match.group(2))
        if found is not None:
            name = match.group(1).decode("latin-1")
            why = (f"contains the control character 0x{found.group()[0]:02x}; a header value "
                   "may hold visible ASCII, spaces and tabs only")
            return f"header {name}: {why}", [{"field": name, "message": why}]
    return "the request is not valid HTTP/1.1 (its request line or headers are malformed)", None


class ApiHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, answering a refused request in the API's shape."""

    _last_received = b""

    def data_received(self, data: bytes) -> None:
        self._last_received = data  # the bytes the parser may refuse (no copy)
        super().data_received(data)

    def send_400_response(self, msg: str) -> None:
        message, details = describe_refusal(self._last_received)
        error: dict[str, Any] = {"code": "bad_request", "message": message, "details": details}
        body = json.dumps({"error": error}).encode()
        content = [b"HTTP/1.1 400 Bad Request\r\n"]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend([b"content-type: application/json\r\n",
                        b"content-length: " + str(len(body)).encode() + b"\r\n",
                        b"connection: close\r\n\r\n", body])
        self.transport.write(b"".join(content))
        self.transport.close()
