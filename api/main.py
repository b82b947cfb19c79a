"""``create_app()``: the Rudder API. Run with ``uvicorn --factory api.main:create_app``."""

from __future__ import annotations

import gc
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from api import telemetry
from api.encoding import Utf8Json
from api.errors import install_error_handlers
from api.limits import BodySizeLimit
from api.openapi import install_openapi
from api.routes import (
    checkpoints,
    commands,
    dashboard,
    dataset_uploads,
    datasets,
    docs,
    events,
    exports,
    health,
    jobs,
    learning_rate,
    lineage,
    metrics,
    models,
    timeline,
    tokens,
    usage,
    workers,
)
from api.state import ServiceState
from core.config import Settings, get_settings


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    logging.getLogger("rudder").setLevel(settings.log_level)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Blocking work runs in threads that release the GIL for every database or Redis
        # round trip and must win it back to continue; at the default 5 ms switch
        # interval each reacquisition can wait that long, which made the submit p99 on
        # PostgreSQL 2-3x worse in bench/service_submit.py. 1 ms trades a little
        # throughput for that tail.
        previous_interval = sys.getswitchinterval()
        sys.setswitchinterval(0.001)
        app.state.service = ServiceState.open(settings)
        app.state.service.start()
        # Everything imported and built so far lives as long as the process. Left in the
        # collector's generations, each full collection walks all of it: 50-100 ms with
        # the GIL held, stalling every request in flight, a few times a minute under load
        # (measured with gc.callbacks during bench/service_submit.py). Frozen, a full
        # collection only walks what requests allocate.
        gc.freeze()
        try:
            yield
        finally:
            gc.unfreeze()
            await app.state.service.close()
            sys.setswitchinterval(previous_interval)

    app = FastAPI(
        title="Rudder",
        version="1",
        description="A training service you can steer while it runs.",
        lifespan=lifespan,
        # FastAPI's docs pages load their scripts from CDNs; api/routes/docs.py serves
        # Swagger UI from this process instead.
        docs_url=None,
        redoc_url=None,
    )
    install_error_handlers(app)
    install_openapi(app)
    app.add_middleware(Utf8Json)  # inside BodySizeLimit: a 413 is decided first
    app.add_middleware(
        BodySizeLimit,
        max_body_bytes=settings.limits.max_spec_bytes,
        max_upload_bytes=settings.limits.max_upload_bytes + 64 * 1024,  # multipart framing
        max_part_bytes=settings.limits.max_upload_part_bytes,
    )
    app.add_middleware(telemetry.RequestMetrics)
    for module in (health, jobs, learning_rate, commands, lineage, metrics, events,
                   checkpoints, timeline, workers, tokens, usage):
        app.include_router(module.router)
    app.include_router(dataset_uploads.router)
    app.include_router(datasets.router)
    app.include_router(models.router)
    app.include_router(exports.router)
    app.include_router(dashboard.router)
    app.mount("/static", StaticFiles(directory=dashboard.DASHBOARD_DIR), name="static")
    app.include_router(docs.router)
    app.mount(docs.ASSETS_PATH, docs.swagger_ui_assets(), name="docs-assets")
    return app
