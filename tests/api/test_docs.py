"""/docs works offline: every script, style and icon comes from the api itself."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

from tests.api.browser import requires_chromium
from tests.conftest import ApiHarness

CONTENT_TYPES = {
    ".js": ("text/javascript", "application/javascript"),
    ".css": ("text/css",),
    ".png": ("image/png",),
}


class _AssetLinks(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        wanted = {"script": "src", "link": "href", "img": "src"}.get(tag)
        for name, value in attrs:
            if name == wanted and value:
                self.urls.append(value)


def test_docs_page_loads_only_assets_served_by_the_api(sqlite_api: ApiHarness) -> None:
    page = sqlite_api.client.get("/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "://" not in page.text  # no CDN, nor any other absolute URL
    links = _AssetLinks()
    links.feed(page.text)
    assert len(links.urls) == 3  # Swagger UI's script, its stylesheet and the icon
    for url in links.urls:
        assert url.startswith("/") and not url.startswith("//"), url
        asset = sqlite_api.client.get(url)
        assert asset.status_code == 200, url
        suffix = url[url.rindex("."):]
        assert asset.headers["content-type"].split(";")[0] in CONTENT_TYPES[suffix], url
        assert len(asset.content) > 0
    assert "url: '/openapi.json'" in page.text
    assert sqlite_api.client.get("/openapi.json").json()["info"]["title"] == "Rudder"


def test_redoc_and_cdn_pages_are_gone(sqlite_api: ApiHarness) -> None:
    assert sqlite_api.client.get("/redoc").status_code == 404
    assert sqlite_api.client.get("/docs/oauth2-redirect").status_code == 404


@requires_chromium
def test_swagger_ui_renders_the_api_in_a_browser(sqlite_api: ApiHarness, browser: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(sqlite_api.url + "/docs")
    WebDriverWait(browser, 20).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")
    )
    paths = {e.text.replace("\u200b", "") for e in browser.find_elements(
        By.CSS_SELECTOR, ".opblock-summary-path")}
    assert "/v1/jobs/{job_id}/learning-rate" in paths
    fetched = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    assert fetched and all(url.startswith(sqlite_api.url + "/") for url in fetched), fetched
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
