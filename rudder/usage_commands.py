"""``rudder usage``: what you store, by kind, against your quota (``GET /v1/usage``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from rich.table import Table

from rudder.commands import client_of, console, print_json

KIND_NAMES = {"datasets": "data sets", "uploads_in_progress": "uploads in progress",
              "models": "models", "checkpoints": "checkpoints", "exports": "exports"}


def human_bytes(count: float) -> str:
    """``1.5 GiB``: binary units, as the quota setting is written."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(count) < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def cmd_usage(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        usage = client.usage()
    if args.json:
        print_json(usage)
        return 0
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("KIND", "BYTES", "SIZE", "QUOTA"):
        table.add_column(name, justify="left" if name in ("KIND", "QUOTA") else "right")
    counted = set(usage["counted"])
    for kind, label in KIND_NAMES.items():
        size = int(usage["bytes"][kind])
        table.add_row(label, str(size), human_bytes(size),
                      "counted" if kind in counted else "not counted")
    console().print(table)
    quota, used = int(usage["quota_bytes"]), int(usage["used_bytes"])
    share = 100 * used / quota if quota else 0.0
    print(f"used {human_bytes(used)} of {human_bytes(quota)} ({share:.1f}%); "
          f"{human_bytes(int(usage['available_bytes']))} left")
    return 0


def add_commands(sub: argparse._SubParsersAction[Any], command: Callable[..., Any]) -> None:
    """Register ``rudder usage``; ``command`` is cli.py's subcommand builder."""
    p = command(sub, "usage", "your stored bytes by kind against your quota (data sets "
                "and models count; checkpoints and exports are shown)", "rudder usage",
                cmd_usage)
    p.add_argument("--json", action="store_true", help="print the API's JSON answer")
