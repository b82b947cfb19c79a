from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse

DASHBOARD_DIR = Path(__file__).resolve().parent.parent / "dashboard"

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
