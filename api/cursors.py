"""The one keyset-cursor codec: a short url-safe token for "resume after this row".

A cursor is the JSON list of the last row's sort key, base64url without padding. It is
opaque to clients; anything this API did not hand out is a 400 naming ``cursor``, and so
is an integer a database column could not hold (a hand-made ``2**70``) or a string with
control characters (a NUL byte, which PostgreSQL refuses).

>>> token = encode_cursor(12, "train_loss")
>>> decode_cursor(token, (int, str))
(12, 'train_loss')
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from api.errors import ApiError, field_error

INT64_MAX = 2**63 - 1


def encode_cursor(*key: str | int) -> str:
    raw = json.dumps(list(key), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _bad_cursor() -> ApiError:
    return field_error("cursor", "is not a cursor returned by this API", status_code=400)


def decode_cursor(cursor: str, shape: tuple[type, ...]) -> tuple[Any, ...]:
    """The key values, each of the type at its place in ``shape`` (str or int)."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, TypeError, binascii.Error) as exc:
        raise _bad_cursor() from exc
    if not isinstance(values, list) or len(values) != len(shape):
        raise _bad_cursor()
    for value, kind in zip(values, shape, strict=True):
        if type(value) is not kind:  # bool is not an int here
            raise _bad_cursor()
        if isinstance(value, int) and not -INT64_MAX - 1 <= value <= INT64_MAX:
            raise _bad_cursor()
        if isinstance(value, str) and not value.isprintable():
            raise _bad_cursor()  # a NUL byte would reach (and be refused by) PostgreSQL
    return tuple(values)
