"""The interactive API docs (Swagger UI), served entirely by this process.

FastAPI's own /docs page loads Swagger UI from a CDN, so it is blank offline or behind
a firewall. The assets come from the ``swagger-ui-bundle-v2`` package instead (Swagger UI
5, which renders the OpenAPI 3.1 document FastAPI writes). ReDoc is not offered: that
package does not ship it, and one docs page is enough.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

DOCS_PATH = "/docs"
ASSETS_PATH = "/docs/assets"

router = APIRouter(include_in_schema=False)


def swagger_ui_assets() -> StaticFiles:
    """Swagger UI's files, for ``app.mount(ASSETS_PATH, ...)``."""
    return StaticFiles(directory=Path(swagger_ui_path))


@router.get(DOCS_PATH)
async def swagger_ui(request: Request) -> HTMLResponse:
    # root_path: behind a proxy that mounts the api under a prefix the links keep it.
    root = request.scope.get("root_path", "").rstrip("/")
    assets = root + ASSETS_PATH
    return get_swagger_ui_html(
        openapi_url=root + (request.app.openapi_url or "/openapi.json"),
        title=f"{request.app.title} - API docs",
        swagger_js_url=f"{assets}/swagger-ui-bundle.js",
        swagger_css_url=f"{assets}/swagger-ui.css",
        swagger_favicon_url=f"{assets}/favicon-32x32.png",
        oauth2_redirect_url=None,  # bearer tokens are pasted in, there is no OAuth2 flow
        # The spec validator badge would call validator.swagger.io: keep the page local.
        swagger_ui_parameters={"validatorUrl": None},
    )
