"""One error shape for every 4xx/5xx: ``{"error": {"code", "message", "details"}}``."""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

import botocore.exceptions
import redis.exceptions
import sqlalchemy.exc
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api import unknown_fields

log = logging.getLogger("rudder.api")

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
    503: "unavailable",
}


# How long a client should wait before retrying after a dependency failed: long enough for
# a restarting Redis or a busy SQLite writer, short enough that nobody gives up.
RETRY_AFTER_SECONDS = 2


class ApiError(Exception):
    """Raise from services/routes; rendered as the standard error body."""

    def __init__(
        self,
        status_code: int,
        code: str,
        message: str,
        *,
        details: Any = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status_code = status_code
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers


def not_found(what: str, ident: str) -> ApiError:
    return ApiError(404, "not_found", f"{what} {ident} not found")


def in_use(what: str, ident: str, job_ids: list[str]) -> ApiError:
    """409: a resource that active jobs still need cannot be deleted."""
    return ApiError(
        409, "in_use",
        f"{what} {ident} is used by {len(job_ids)} queued, running or paused job(s)",
        details={"jobs": job_ids},
    )


def field_error(field: str, message: str, *, status_code: int = 422) -> ApiError:
    """A validation error that names the offending field."""
    return ApiError(
        status_code,
        "validation_error",
        f"{field}: {message}",
        details=[{"field": field, "message": message}],
    )


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details}}


def _field_name(location: tuple[Any, ...] | list[Any]) -> str:
    # Drop the "body"/"query" source and pydantic's union tags so the name is the user's.
    parts = [str(p) for p in location]
    if parts and parts[0] in ("body", "query", "path", "header", "form"):
        source, parts = parts[0], parts[1:]
        if source != "body" and parts:
            return ".".join(parts)
    # Union members appear as tags like "Dense" or "function-after[...]"; every field name
    # in our schemas is lower case, so anything capitalised or bracketed is a tag.
    named = [p for p in parts if not (p[:1].isupper() or "[" in p)]
    return ".".join(named) or "body"


# Unions whose member a ``type`` field picks (core.commands, core.rules): when no member
# matches, the field at fault is that ``type``, not the object holding it.
_UNKNOWN_TYPE_ERRORS = frozenset({"command_type", "rule_type"})


def _validation_details(exc: RequestValidationError, body_type: Any = None
                        ) -> list[dict[str, Any]]:
    details = []
    meant: set[tuple[Any, ...]] = set()  # (parent location, field) a typo stood for
    for error in exc.errors():
        message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
        location = tuple(error.get("loc", ()))
        if error.get("type") in _UNKNOWN_TYPE_ERRORS:
            location = (*location, "type")
        if error.get("type") == "extra_forbidden" and location[:1] == ("body",):
            message, field = unknown_fields.explain(body_type, location[1:])
            if field is not None:
                meant.add((*location[:-1], field))
        details.append(
            {"field": _field_name(location), "message": message, "type": error.get("type"),
             "_location": location}
        )
    # A typo's consequence ("units: Field required" beside "unit: unknown field; did you
    # mean units?") is dropped; unknown fields lead, being the likelier cause of the rest.
    kept = []
    for detail in details:
        location = detail.pop("_location")
        if not (detail["type"] == "missing" and location in meant):
            kept.append(detail)
    kept.sort(key=lambda d: d["type"] != "extra_forbidden")
    return kept


def _body_type(request: Request) -> Any:
    """The annotation of the route's body (None: no typed body)."""
    body_field = getattr(request.scope.get("route"), "body_field", None)
    field_info = getattr(body_field, "field_info", None)
    return getattr(field_info, "annotation", None)


def unavailable(message: str) -> ApiError:
    """A 503 for a dependency that failed: the client may simply retry."""
    return ApiError(503, "unavailable", message,
                    headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


async def _on_api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    headers = dict(exc.headers or {})
    if exc.status_code == 503:
        headers.setdefault("Retry-After", str(RETRY_AFTER_SECONDS))
    return JSONResponse(
        error_body(exc.code, exc.message, exc.details), exc.status_code, headers=headers
    )


# Failures of a dependency, not of the request: each is a 503 the client may retry.
# (Redis refusing a command, sqlalchemy's IntegrityError or DataError, are bugs or bad
# input and stay what they are.)
_REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
_DATABASE_DOWN = (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError,
                  sqlalchemy.exc.TimeoutError)
_STORAGE_DOWN = (botocore.exceptions.ConnectionError, botocore.exceptions.HTTPClientError)


def dependency_error(exc: BaseException) -> ApiError | None:
    """The 503 that stands for ``exc`` when it is a dependency failure, else None."""
    if isinstance(exc, _REDIS_DOWN):
        return unavailable("the live channel (Redis) is not answering; retry shortly")
    if isinstance(exc, sqlalchemy.exc.DBAPIError) and _is_lock_wait(exc):
        return unavailable("the database is busy (another connection held a lock this "
                           "request needs past the lock timeout); retry shortly")
    if isinstance(exc, _DATABASE_DOWN):
        return unavailable("the database is unavailable or busy; retry shortly")
    if isinstance(exc, _STORAGE_DOWN):
        return unavailable("object storage is not answering; retry shortly")
    return None


def _is_lock_wait(exc: sqlalchemy.exc.DBAPIError) -> bool:
    """SQLite's "database is locked" or PostgreSQL's lock_not_available (55P03)."""
    if isinstance(exc.orig, sqlite3.OperationalError):
        return "locked" in str(exc.orig)
    return getattr(exc.orig, "sqlstate", None) == "55P03"


async def _on_dependency_error(request: Request, exc: Exception) -> JSONResponse:
    error = dependency_error(exc)
    if error is None:  # registered only for the classes dependency_error maps
        raise exc
    log.warning("%s %s: %s (%s)", request.method, request.url.path, error.message,
                type(exc).__name__)
    return await _on_api_error(request, error)


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    details = _validation_details(exc, _body_type(request))
    if any(d["type"] == "json_invalid" for d in details):
        message = "the request body is not valid JSON"
        return JSONResponse(error_body("malformed_json", message, details), 400)
    first = details[0] if details else {"field": "body", "message": "invalid request"}
    message = f"{first['field']}: {first['message']}"
    if len(details) > 1:
        message += f" (and {len(details) - 1} more)"
    return JSONResponse(error_body("validation_error", message, details), 422)


def _allowed_methods(request: Request) -> str:
    """Every method the OpenAPI document gives the path. (FastAPI makes one route per
    method, and its 405 named only the methods of whichever route matched the path.)
    Where several templates fit, the one with the most literal segments wins, as
    ``/v1/datasets/uploads`` over ``/v1/datasets/{dataset_id}``."""
    segments = request.url.path.rstrip("/").split("/")
    best: tuple[int, str] = (-1, "")
    for template, operations in request.app.openapi().get("paths", {}).items():
        parts = template.rstrip("/").split("/")
        if len(parts) != len(segments):
            continue
        literal = 0
        for part, segment in zip(parts, segments, strict=True):
            if part == segment:
                literal += 1
            elif not (part.startswith("{") and segment):
                break
        else:
            if literal > best[0]:
                best = (literal, ", ".join(sorted(method.upper() for method in operations)))
    return best[1]


async def _on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _CODES.get(exc.status_code, "error")
    headers = dict(getattr(exc, "headers", None) or {})
    if exc.status_code == 405:
        headers["Allow"] = _allowed_methods(request)
    return JSONResponse(error_body(code, str(exc.detail)), exc.status_code, headers=headers)


class CatchAllErrors:
    """Turns an unexpected exception into a logged, generic JSON 500.

    Starlette's own catch-all re-raises after answering, and uvicorn then drops the
    keep-alive connection under the client; this answers and keeps the server calm.
    """

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            log.exception("unhandled error on %s %s", scope["method"], scope["path"])
            if started:
                raise  # half a response is out; only closing the connection is honest
            response = JSONResponse(error_body("internal_error", "internal server error"), 500)
            await response(scope, receive, send)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _on_api_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    for kind in (*_REDIS_DOWN, *_DATABASE_DOWN, *_STORAGE_DOWN):
        app.add_exception_handler(kind, _on_dependency_error)
    app.add_middleware(CatchAllErrors)
