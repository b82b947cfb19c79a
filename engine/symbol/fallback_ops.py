"""Private NDArray helpers for symbol operators that ``engine.nd`` does not offer yet."""

from __future__ import annotations

from typing import Any

FUNCTIONS: dict[str, Any] = {}
