"""The OpenAPI document as a client sees the API: bearer auth and the real error bodies.

FastAPI documents neither on its own: without a security scheme Swagger UI's "Try it
out" sends no token (401 "Undocumented"), and every 422 points at its own
``HTTPValidationError`` while this API answers ``{"error": {code, message, details}}``
(api/errors.py). This module post-processes the generated document once: a ``bearer``
scheme on every ``/v1`` operation, and each operation's error statuses (by what the
route does: path ids, a body, control of a live job, rate limits) pointing at
``ErrorBody``.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, Field

BEARER = "BearerAuth"
_DESCRIPTIONS = {
    400: "Malformed request (invalid JSON, JSON with a UTF-8 byte order mark, a cursor or "
         "stream id this API did not issue, a header value with a control character)",
    401: "Missing, invalid, revoked or expired bearer token",
    403: "The token may not do this",
    404: "No such resource among the caller's (another user's looks the same)",
    409: "The resource's state forbids this (e.g. a job that is not finished)",
    413: "The request body exceeds the configured limit",
    415: "A JSON body that is not UTF-8 (UTF-16, UTF-32, another charset): JSON must be "
         "UTF-8 (RFC 8259); details.encoding names what was sent",
    422: "Invalid input; details name each offending field",
    429: "Rate limited; retry after the Retry-After header",
    503: "A dependency (database, Redis, object storage) is unavailable; retry later",
}
# Operations that act on a job's live state, by (method, path).
_CONFLICTS = {
    ("post", "/v1/jobs"),  # an Idempotency-Key reused with another body
    ("post", "/v1/jobs/{job_id}/pause"),
    ("post", "/v1/jobs/{job_id}/resume"),
    ("post", "/v1/jobs/{job_id}/cancel"),
    ("put", "/v1/jobs/{job_id}/learning-rate"),
    ("post", "/v1/jobs/{job_id}/commands"),
    ("post", "/v1/jobs/{job_id}/rollback"),
    ("post", "/v1/jobs/{job_id}/fork"),
    ("delete", "/v1/jobs/{job_id}"),
    ("delete", "/v1/datasets/{dataset_id}"),
}
_RATE_LIMITED = {("put", "/v1/jobs/{job_id}/learning-rate"),
                 ("post", "/v1/jobs/{job_id}/commands"), ("post", "/v1/jobs/{job_id}/rollback")}
_WITH_CURSOR_OR_STREAM_ID = {("get", "/v1/jobs"), ("get", "/v1/jobs/{job_id}/metrics"),
                             ("get", "/v1/jobs/{job_id}/events"),
                             ("get", "/v1/jobs/{job_id}/metrics/abandoned")}


class ErrorDetail(BaseModel):
    code: str = Field(description="machine-readable, e.g. validation_error, not_found")
    message: str = Field(description="one line for a person")
    details: Any = Field(default=None, description="per-field problems or context")


class ErrorBody(BaseModel):
    """Every 4xx/5xx answer of this API."""

    error: ErrorDetail


def error_statuses(method: str, path: str, operation: dict[str, Any]) -> list[int]:
    """The error statuses an operation can answer with (its 2xx are FastAPI's)."""
    statuses = {401, 503}
    if "{" in path:
        statuses.add(404)
    if operation.get("requestBody") or operation.get("parameters"):
        statuses.add(422)
    if operation.get("requestBody"):
        statuses.add(413)
    if "application/json" in operation.get("requestBody", {}).get("content", {}):
        statuses.add(415)
    if (method, path) in _CONFLICTS:
        statuses.add(409)
    if (method, path) in _RATE_LIMITED:
        statuses.add(429)
    if operation.get("requestBody") or (method, path) in _WITH_CURSOR_OR_STREAM_ID:
        statuses.add(400)
    return sorted(statuses)


def _error_response(status: int) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": _DESCRIPTIONS[status],
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    }
    if status in (429, 503):
        response["headers"] = {"Retry-After": {
            "description": "seconds to wait before retrying",
            "schema": {"type": "integer", "minimum": 1},
        }}
    return response


def build_openapi(app: FastAPI) -> dict[str, Any]:
    schema = get_openapi(title=app.title, version=app.version, description=app.description,
                         routes=app.routes)
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    error_schema = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(error_schema.pop("$defs", {}))
    schemas["ErrorBody"] = error_schema
    components["securitySchemes"] = {
        BEARER: {"type": "http", "scheme": "bearer",
                 "description": "a token from `rudder token create` (rdr_...)"},
    }
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            if not path.startswith("/v1/"):
                # health and Prometheus: public, and answer in their own formats
                responses.pop("422", None)
                continue
            operation["security"] = [{BEARER: []}]
            for status in error_statuses(method, path, operation):
                responses[str(status)] = _error_response(status)
    return schema


def install_openapi(app: FastAPI) -> None:
    """Serve :func:`build_openapi`'s document at /openapi.json (built once, cached)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build_openapi(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
