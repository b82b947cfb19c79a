"""Prometheus metrics for the api (exposed at ``GET /metrics``)."""

from __future__ import annotations

import time

from prometheus_client import Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

REQUESTS = Counter(
    "rudder_http_requests_total", "HTTP requests", ["method", "route", "status"]
)
LATENCY = Histogram(
    "rudder_http_request_duration_seconds",
    "HTTP request latency",
    ["method", "route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
JOBS_SUBMITTED = Counter("rudder_jobs_submitted_total", "Jobs accepted", ["queue"])
ENQUEUE_FAILURES = Counter("rudder_enqueue_failures_total",
                           "Dispatch passes the broker or database refused (retried)")
LR_CHANGES = Counter("rudder_lr_changes_total", "Learning-rate changes accepted")
SSE_CONNECTIONS = Gauge("rudder_sse_connections", "Open event streams")


class RequestMetrics:
    """Pure ASGI middleware (no BaseHTTPMiddleware overhead): count and time requests,
    labelled by route template rather than raw path, since job ids would explode the
    label set."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_with_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_with_status)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            if route != "/v1/jobs/{job_id}/events":  # streams last minutes; not a latency
                LATENCY.labels(scope["method"], route).observe(time.perf_counter() - started)
            REQUESTS.labels(scope["method"], route, str(status)).inc()
