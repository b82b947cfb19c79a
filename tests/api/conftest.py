from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.browser import headless_chromium


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless Chromium (mark the test ``requires_chromium`` from tests.api.browser)."""
    with headless_chromium() as driver:
        yield driver
