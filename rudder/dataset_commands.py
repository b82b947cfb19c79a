"""``rudder datasets upload|ls|show|rm``.

Small ``.npz``/``.csv`` files go in one request (the smallest come back validated).
Anything larger, and every RecordIO pair or image archive, goes as a resumable chunked
upload: the CLI remembers the upload id in a state file keyed by the file (path, size,
mtime) and the API URL, so running the same command again after an interruption sends
only the parts the server is missing. A validator then checks the data set; ``--wait``
follows it to ``ready`` or ``invalid``, saying whether it is still queued for a
validator or being checked.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from rudder.client import Client, RudderError
from rudder.commands import (
    UsageError,
    client_of,
    console,
    dataset_id,
    print_id_table,
    print_json,
)
from rudder.usage_commands import human_bytes

# Below this a .npz/.csv goes in one request (validated at once); above, in parts.
SINGLE_REQUEST_BYTES = 16 * 1024 * 1024
SINGLE_REQUEST_SUFFIXES = (".npz", ".csv")


def _state_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rudder" / "uploads"


def _state_file(url: str, paths: list[Path]) -> Path:
    """Where the upload id of these files (as they are now) to this API is remembered."""
    identity = [url] + [f"{p.resolve()}:{p.stat().st_size}:{p.stat().st_mtime_ns}"
                        for p in paths]
    digest = hashlib.sha256("\n".join(identity).encode()).hexdigest()[:32]
    return _state_dir() / f"{digest}.json"


def _files_of(path: Path) -> list[Path]:
    """The files one upload holds: a .rec brings its .idx (same stem) along."""
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    if path.suffix.lower() == ".rec":
        index = path.with_suffix(".idx")
        if not index.is_file():
            raise UsageError(f"{path}: its index {index.name} is missing (MXNet writes both)")
        return [path, index]
    return [path]


def _resumable_upload(client: Client, state: Path) -> dict[str, Any] | None:
    try:
        upload_id = json.loads(state.read_text())["upload_id"]
        upload: dict[str, Any] = client.upload_state(upload_id)
    except (OSError, ValueError, KeyError, RudderError):
        return None
    return upload if upload["status"] == "open" else None


def upload_in_parts(client: Client, paths: list[Path], name: str, *, quiet: bool,
                    part_size: int | None = None, connections: int = 2) -> dict[str, Any]:
    state = _state_file(client.url, paths)
    upload = _resumable_upload(client, state)
    if upload is None:
        upload = client.create_upload(name, [(p.name, p.stat().st_size) for p in paths],
                                      part_size=part_size)
        state.parent.mkdir(parents=True, exist_ok=True)
        state.write_text(json.dumps({"upload_id": upload["id"]}))
    elif not quiet:
        console().print(f"resuming upload {upload['id']}: "
                        f"{len(upload['missing'])} of {upload['total_parts']} parts to send")
    received = sum(int(p["size"]) for p in upload["received"])
    with Progress("[progress.description]{task.description}", BarColumn(),
                  DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                  console=console(), disable=quiet, transient=False) as progress:
        task = progress.add_task(name, total=upload["total_size"], completed=received)
        advance: Callable[[int], None] = lambda n: progress.advance(task, n)  # noqa: E731
        client.send_parts(upload, {p.name: p for p in paths}, on_part=advance,
                          connections=connections)
    dataset: dict[str, Any] = client.complete_upload(upload["id"])
    state.unlink(missing_ok=True)
    return dataset


def validation_state(dataset: dict[str, Any]) -> str:
    """What is happening to a data set still ``validating``, truthfully: waiting in the
    validation queue, or being checked by a validator (and for how long)."""
    if dataset.get("validation") == "running":
        started = dataset.get("validation_started_at")
        since = ""
        if started:
            seconds = (datetime.now(UTC) - datetime.fromisoformat(started)).total_seconds()
            since = f" (for {max(0, seconds):.0f} s)"
        return f"a validator is checking it{since}"
    return "queued for validation (no validator has taken it up yet)"


def _wait_for_validation(client: Client, dataset: dict[str, Any], seconds: float, *,
                         quiet: bool) -> Any:
    deadline = time.monotonic() + seconds
    said = ""
    while dataset["status"] == "validating" and time.monotonic() < deadline:
        state = str(dataset.get("validation"))
        if not quiet and state != said:
            console().print(f"{dataset['id'][:8]}: {validation_state(dataset)}")
            said = state
        time.sleep(0.5)
        dataset = client.dataset(dataset["id"])
    return dataset


def cmd_upload(args: argparse.Namespace) -> int:
    path = Path(args.file)
    paths = _files_of(path)
    name = args.name or path.name
    with client_of(args) as client:
        small = (path.suffix.lower() in SINGLE_REQUEST_SUFFIXES
                 and path.stat().st_size <= SINGLE_REQUEST_BYTES and not args.parts)
        if small:
            dataset = client.upload_dataset(path, name=name)
        else:
            dataset = upload_in_parts(client, paths, name, quiet=args.quiet,
                                      part_size=args.part_size,
                                      connections=args.connections)
        dataset = _wait_for_validation(client, dataset, args.wait, quiet=args.quiet)
    if args.quiet:
        print(dataset["id"])
    elif dataset["status"] == "ready":
        print(f"uploaded {dataset['id']} ({dataset.get('num_rows')} records, "
              f"shape {dataset.get('feature_shape')}); use it as data.train: "
              f"{{dataset: {dataset['id']}}}")
    elif dataset["status"] == "invalid":
        print(f"dataset {dataset['id']} is invalid: {dataset.get('reason')}")
    else:
        print(f"uploaded {dataset['id']}; {validation_state(dataset)} "
              f"(rudder datasets show {dataset['id'][:8]})")
    return 1 if dataset["status"] == "invalid" else 0


def cmd_ls(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        rows = client.datasets().get("data", [])
    if args.json:
        print_json(rows)
        return 0
    print_id_table(DATASET_COLUMNS, [_row(row) for row in rows],
                   left=("ID", "NAME", "FORMAT", "STATUS", "SHAPE"))
    return 0


DATASET_COLUMNS = ("ID", "NAME", "FORMAT", "STATUS", "ROWS", "SHAPE", "CLASSES", "SIZE")


def _row(dataset: dict[str, Any]) -> list[str]:
    ready = dataset.get("status") == "ready"
    # A ready set without classes has labels that are not class indices (floats, vectors,
    # negative numbers): a regression target. Until validated nothing is known.
    classes = dataset.get("num_classes")
    shown_classes = str(classes) if classes is not None else "regression" if ready else "-"
    status = str(dataset.get("status", ""))
    if dataset.get("validation"):  # validating: queued for a validator, or running
        status = f"{status} ({dataset['validation']})"
    return [str(dataset["id"]), str(dataset.get("name", "")), str(dataset.get("format", "")),
            status, str(dataset.get("num_rows")) if ready else "-",
            "x".join(map(str, dataset.get("feature_shape") or [])) or "-",
            shown_classes, human_bytes(float(dataset.get("size") or 0))]


def cmd_show(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        print_json(client.dataset(dataset_id(client, args.dataset)))
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        full = dataset_id(client, args.dataset)
        client.delete_dataset(full)
    print(f"deleted dataset {full}")
    return 0


def add_commands(sub: argparse._SubParsersAction[Any], command: Callable[..., Any]) -> None:
    """Register ``rudder datasets ...``; ``command`` is cli.py's subcommand builder."""
    p = sub.add_parser("datasets", help="upload and manage your data sets",
                       description="upload and manage your data sets")
    dsub = p.add_subparsers(dest="datasets_command", required=True, metavar="COMMAND")
    p = command(dsub, "upload", "upload a .npz, .csv, .rec (with its .idx) or an image-folder "
                ".zip/.tar; large files go in resumable parts (run it again to resume)",
                "rudder datasets upload train.rec --name cifar-train --wait 600", cmd_upload)
    p.add_argument("file", metavar="FILE", help=".npz, .csv, .rec (+ .idx beside it), .zip, .tar")
    p.add_argument("--name", help="a name to show (default: the file name)")
    p.add_argument("--parts", action="store_true",
                   help="send a small .npz/.csv in parts too (validated by a validator)")
    p.add_argument("--part-size", type=int, metavar="BYTES",
                   help="bytes per part (default: the server's)")
    p.add_argument("--connections", type=int, default=2, metavar="N",
                   help="parts sent at once (default 2; each holds one part in memory)")
    p.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                   help="wait up to SECONDS for the validation (exit 1 if invalid)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress bar; print only the dataset id")
    p = command(dsub, "ls", "list your data sets", "rudder datasets ls", cmd_ls)
    p.add_argument("--json", action="store_true", help="print the API's JSON answer")
    for name, what, func in (
        ("show", "show one data set as JSON (status, reason, stats)", cmd_show),
        ("rm", "delete a data set no queued or running job uses", cmd_rm),
    ):
        p = command(dsub, name, what, f"rudder datasets {name} 5b2e91", func)
        p.add_argument("dataset", metavar="DATASET",
                       help="dataset id, or a unique prefix of it (6 or more characters)")
