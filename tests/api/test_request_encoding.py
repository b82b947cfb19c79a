"""Issue 25 item 11: JSON must arrive as UTF-8 without a byte order mark (RFC 8259), and a
request the HTTP parser refuses (a control character in a header value) is answered in
the API's error shape, not uvicorn's plain text."""

from __future__ import annotations

import json
import socket

import pytest

from tests.api.specs import digits_spec
from tests.conftest import ApiHarness

BODY = json.dumps(digits_spec())


@pytest.mark.parametrize(
    ("raw", "status", "code", "named"),
    [
        (BODY.encode("utf-16"), 415, "unsupported_media_type", "UTF-16"),
        (BODY.encode("utf-16-be"), 415, "unsupported_media_type", "UTF-16 (big-endian)"),
        (BODY.encode("utf-32"), 415, "unsupported_media_type", "UTF-32"),
        (b"\xef\xbb\xbf" + BODY.encode(), 400, "malformed_json", "byte order mark"),
    ],
)
def test_a_json_body_that_is_not_plain_utf8_is_refused_naming_its_encoding(
    api: ApiHarness, raw: bytes, status: int, code: str, named: str
) -> None:
    _, headers = api.make_user()
    answer = api.client.post("/v1/jobs", content=raw,
                             headers=headers | {"Content-Type": "application/json"})
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["code"] == code and named in error["message"], error
    assert api.client.get("/v1/jobs", headers=headers).json()["data"] == []


def test_a_charset_other_than_utf8_is_refused_and_utf8_is_accepted(api: ApiHarness) -> None:
    _, headers = api.make_user()
    refused = api.client.post("/v1/jobs", content=BODY.encode("latin-1"), headers=headers | {
        "Content-Type": "application/json; charset=latin-1"})
    assert refused.status_code == 415
    assert "charset=latin-1" in refused.json()["error"]["message"]
    for content_type in ("application/json", "application/json; charset=utf-8"):
        accepted = api.client.post("/v1/jobs", content=BODY.encode(),
                                   headers=headers | {"Content-Type": content_type})
        assert accepted.status_code == 201, accepted.text


def test_the_openapi_document_lists_the_415(api: ApiHarness) -> None:
    document = api.client.get("/openapi.json").json()
    assert "415" in document["paths"]["/v1/jobs"]["post"]["responses"]


def _raw_request(api: ApiHarness, request: bytes) -> tuple[str, dict[str, str], bytes]:
    host, port = api.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return status, headers, body


@pytest.mark.parametrize("value", [b"a\x01b", b"a\x7fb", b"a\x00b"])
def test_a_control_character_in_a_header_gets_the_api_error_shape(
    api: ApiHarness, value: bytes
) -> None:
    """The parser refuses the header before the app runs (so the app cannot see or
    accept it); the answer is still the API's JSON error naming the header."""
    _, headers = api.make_user()
    body = BODY.encode()
    request = (b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\n"
               + f"Authorization: {headers['Authorization']}\r\n".encode()
               + b"Idempotency-Key: " + value + b"\r\nContent-Type: application/json\r\n"
               + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    status, answer_headers, answer = _raw_request(api, request)
    assert status.startswith("HTTP/1.1 400"), status
    assert answer_headers["content-type"] == "application/json"
    error = json.loads(answer)["error"]
    assert error["code"] == "bad_request"
    assert error["message"].startswith("header Idempotency-Key: contains the control character")
    assert error["details"][0]["field"] == "Idempotency-Key"
    assert api.client.get("/v1/jobs", headers=headers).json()["data"] == []


def test_a_raw_upload_part_is_never_taken_for_utf16(api: ApiHarness) -> None:
    """Parts are raw bytes with no Content-Type: bytes that look like a UTF-16 byte order
    mark or UTF-16 text are data, not an encoding."""
    from tests.api import uploads

    _, headers = api.make_user()
    data = b"\xff\xfe\x00\x01" * 250 + b"\x00a\x00b" * 125
    upload = uploads.create(api.client, headers, {"a.npz": data}).json()
    for number, part in uploads.parts_of(upload, {"a.npz": data}).items():
        answer = uploads.put_part(api.client, headers, upload["id"], number, part)
        assert answer.status_code == 200, answer.text
