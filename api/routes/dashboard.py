from __future__ import annotations

from pathlib import Path
from typing import Literal

from fastapi import APIRouter
from fastapi.responses import FileResponse, PlainTextResponse, Response

DASHBOARD_DIR = Path(__file__).resolve().parent.parent / "dashboard"
# The chart library comes from npm (package.json pins it, `make dashboard-deps` runs
# `npm ci`); the api serves it from its own origin so the page needs no CDN.
UPLOT_DIST = DASHBOARD_DIR.parent.parent / "node_modules" / "uplot" / "dist"
VENDOR_FILES = {
    "uplot.js": ("uPlot.iife.min.js", "text/javascript"),
    "uplot.css": ("uPlot.min.css", "text/css"),
}
MISSING_VENDOR = (
    "The dashboard's chart library (uPlot) is not installed. Run `make dashboard-deps` "
    "(or `npm ci` in the repository root) and reload the page.\n"
)

router = APIRouter(include_in_schema=False)
# Only this server's own scripts and styles may run: the page handles an API token.
DASHBOARD_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@router.get("/")
def dashboard() -> FileResponse:
    """The static dashboard (no build step, nothing fetched from outside)."""
    return FileResponse(DASHBOARD_DIR / "index.html", headers=DASHBOARD_HEADERS)


@router.get("/vendor/{name}", response_model=None)
def vendor_file(name: Literal["uplot.js", "uplot.css"]) -> Response:
    """uPlot from node_modules, or a 503 that says how to install it."""
    file_name, media_type = VENDOR_FILES[name]
    path = UPLOT_DIST / file_name
    if not path.is_file():
        return PlainTextResponse(MISSING_VENDOR, status_code=503, headers=DASHBOARD_HEADERS)
    return FileResponse(path, media_type=media_type, headers=DASHBOARD_HEADERS)
