"""Resident memory of a process, read from /proc: the memory checks of issue 25 assert
the peak of the process under test (``VmHWM``), not a status code."""

from __future__ import annotations

from pathlib import Path

MIB = 1024 * 1024


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(f"/proc/{pid}/status has no {field}")


def rss_bytes(pid: int) -> int:
    return _status_kib(pid, "VmRSS") * 1024


def peak_rss_bytes(pid: int) -> int:
    """The most the process has held resident since it started, or since reset_peak."""
    return _status_kib(pid, "VmHWM") * 1024


def reset_peak(pid: int) -> None:
    """Set the peak back to the current resident size (Linux: clear_refs value 5)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
