from __future__ import annotations

from pathlib import Path
from typing import Literal

from fastapi import APIRouter
from fastapi.responses import FileResponse, PlainTextResponse, Response

DASHBOARD_DIR = Path(__file__).resolve().parent.parent / "dashboard"
# The page's libraries come from npm (package.json pins them, `make dashboard-deps` runs
# `npm ci`); the api serves them from its own origin so the page needs no CDN.
NODE_MODULES = DASHBOARD_DIR.parent.parent / "node_modules"
VendorFile = Literal["uplot.js", "uplot.css", "js-yaml.js"]
VENDOR_FILES: dict[str, tuple[str, str]] = {
    "uplot.js": ("uplot/dist/uPlot.iife.min.js", "text/javascript"),
    "uplot.css": ("uplot/dist/uPlot.min.css", "text/css"),
    "js-yaml.js": ("js-yaml/dist/js-yaml.min.js", "text/javascript"),
}
MISSING_VENDOR = (
    "The dashboard's libraries (uPlot, js-yaml) are not installed. Run `make dashboard-deps` "
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


# The dashboard's deep links (router.js): the same page at each view's URL, so a reload
# or a shared link opens that view.
@router.get("/jobs/{job_id}")
@router.get("/compare")
@router.get("/submit")
@router.get("/system")
def dashboard_view() -> FileResponse:
    """The dashboard at one of its views' URLs (the page reads the path)."""
    return FileResponse(DASHBOARD_DIR / "index.html", headers=DASHBOARD_HEADERS)


@router.get("/vendor/{name}", response_model=None)
def vendor_file(name: VendorFile) -> Response:
    """A library from node_modules, or a 503 that says how to install it."""
    file_name, media_type = VENDOR_FILES[name]
    path = NODE_MODULES / file_name
    if not path.is_file():
        return PlainTextResponse(MISSING_VENDOR, status_code=503, headers=DASHBOARD_HEADERS)
    return FileResponse(path, media_type=media_type, headers=DASHBOARD_HEADERS)
