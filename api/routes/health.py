from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from api.deps import StateDep
from core.db import check_database

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "a dependency is down"}})
async def readyz(state: StateDep) -> JSONResponse:
    """Readiness: the database, Redis and object storage all answer."""
    checks: dict[str, str] = {}
    try:
        await run_in_threadpool(check_database, state.engine)
        checks["database"] = "ok"
    except Exception as exc:  # report, don't raise: this endpoint exists to say what is down
        checks["database"] = f"error: {type(exc).__name__}"
    if state.async_channel is None:
        checks["redis"] = "error: not configured (RUDDER_REDIS_URL)"
    else:
        try:
            await state.async_channel.ping()
            checks["redis"] = "ok"
        except Exception as exc:
            checks["redis"] = f"error: {type(exc).__name__}"
    try:
        await run_in_threadpool(state.store.check)
        checks["storage"] = "ok"
    except Exception as exc:
        checks["storage"] = f"error: {type(exc).__name__}"
    ready = all(v == "ok" for v in checks.values())
    return JSONResponse(
        {"status": "ready" if ready else "unavailable", "checks": checks},
        status_code=200 if ready else 503,
    )


@router.get("/metrics", response_class=Response)
def prometheus_metrics() -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
