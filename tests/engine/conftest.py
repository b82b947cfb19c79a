"""Fixtures shared by the engine's tests."""

from __future__ import annotations

import pytest

from engine.ndarray import kernel_threads


@pytest.fixture
def every_kernel_parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Above 1 thread, every compiled kernel takes its parallel build whatever its arrays'
    size (so the thread-count tests check those builds, not the size threshold)."""
    monkeypatch.setattr(kernel_threads, "PARALLEL_MIN_ELEMENTS", 0)
