"""What each ``rudder`` command does (the parser is in rudder/cli.py).

Every command returns its exit code; a problem the user can fix raises :class:`UsageError`
(one line on stderr, exit 2), an API error :class:`rudder.client.RudderError` (exit 1).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from rudder import watch as watching
from rudder.client import Client

MIN_PREFIX = 6
FULL_ID_LENGTH = 36
POLL_SECONDS = 0.3
JOB_COLUMNS = ("ID", "NAME", "STATUS", "EPOCHS", "STEP", "LR")


class UsageError(Exception):
    """A mistake in what was asked: printed as one line, exit code 2."""


def client_of(args: argparse.Namespace) -> Client:
    return Client(url=args.url, token=args.token)


def console() -> Console:
    """Rich output fitted to the terminal; not a terminal (a pipe, a file): no width cap,
    so `rudder ls | grep` sees whole ids and names."""
    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return Console(highlight=False, soft_wrap=False)
    return Console(highlight=False, soft_wrap=False, width=1000)


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True, default=str))


def resolve(ref: str, ids: Callable[[], Any], what: str = "job") -> str:
    """A full id from a unique prefix of at least 6 characters (``rudder show 88a14e78``)."""
    ref = ref.strip().lower()
    if len(ref) == FULL_ID_LENGTH:
        return ref
    if len(ref) < MIN_PREFIX:
        raise UsageError(f"{what} id {ref!r} is too short: give at least {MIN_PREFIX} "
                         "characters")
    matches = sorted({str(i) for i in ids() if str(i).lower().startswith(ref)})
    if not matches:
        raise UsageError(f"no {what} id starts with {ref!r}")
    if len(matches) > 1:
        shown = ", ".join(matches[:5]) + (" ..." if len(matches) > 5 else "")
        raise UsageError(f"{what} id {ref!r} is ambiguous: it matches {shown}")
    return matches[0]


def job_id(client: Client, ref: str) -> str:
    return resolve(ref, lambda: (job["id"] for job in client.all_jobs()))


def dataset_id(client: Client, ref: str) -> str:
    return resolve(ref, lambda: (d["id"] for d in client.datasets().get("data", [])),
                   "dataset")


def finite_positive(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{what} must be a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{what} must be a finite number > 0, got {text!r}")
    return value


# ------------------------------------------------------------------ jobs


def cmd_submit(args: argparse.Namespace) -> int:
    try:
        spec = yaml.safe_load(Path(args.spec).read_text())
    except yaml.YAMLError as exc:
        raise UsageError(f"{args.spec} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(spec, dict):
        raise UsageError(f"{args.spec}: a job spec is a YAML mapping")
    with client_of(args) as client:
        job = client.submit(spec, idempotency_key=args.idempotency_key)
    print(job["id"] if args.quiet else f"submitted {job['id']} ({job.get('status')})")
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        body = client.list_jobs(status=args.status, limit=args.limit)
    if args.json:
        print_json(body)
        return 0
    rows = []
    for job in body.get("data", []):
        progress = job.get("progress") or {}
        lr = progress.get("current_lr")
        rows.append([str(job["id"]), str(job.get("name", "")), str(job.get("status", "")),
                     str(progress.get("epoch", 0)), str(progress.get("step", 0)),
                     "" if lr is None else f"{lr:.3g}"])
    print_id_table(JOB_COLUMNS, rows, left=("ID", "NAME", "STATUS"))
    return 0


def print_id_table(columns: Sequence[str], rows: list[list[str]],
                   left: Collection[str]) -> None:
    """A table whose first column is ids. Too narrow a terminal shortens the ids (any
    unique prefix is accepted), not the names or statuses; a pipe gets the full ids."""
    out = console()
    others = sum(max([len(h)] + [len(r[i]) for r in rows]) + 2
                 for i, h in enumerate(columns) if i)
    id_width = max(MIN_PREFIX + 2, min(FULL_ID_LENGTH, out.width - others))
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in columns:
        table.add_column(name, justify="left" if name in left else "right",
                         no_wrap=True, overflow="ellipsis")
    for row in rows:
        table.add_row(row[0][:id_width], *row[1:])
    out.print(table)


def cmd_show(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        print_json(client.get_job(job_id(client, args.job)))
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        job = client.get_job(job_id(client, args.job))
        return watching.watch(client, job, console())


def cmd_logs(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        return watching.logs(client, job_id(client, args.job), args.follow)


def control(method: str) -> Callable[[argparse.Namespace], int]:
    """pause/resume/cancel. The worker carries out a pause or cancel of a running job at its
    next step boundary: wait up to --wait seconds for it, so that `rudder cancel J && rudder
    delete J` works."""

    def run(args: argparse.Namespace) -> int:
        with client_of(args) as client:
            full = job_id(client, args.job)
            body = getattr(client, method)(full)
            body = body if isinstance(body, dict) else {}
            status = str(body.get("status", method))
            if not body.get("pending"):
                print(f"{full}: {status}")
                return 0
            wait = getattr(args, "wait", 0.0)
            if wait < 0 or not math.isfinite(wait):
                raise UsageError(f"--wait must be a number of seconds >= 0, got {wait}")
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                status = str(client.get_job(full).get("status"))
                if status != "running":
                    print(f"{full}: {status}")
                    return 0
                time.sleep(POLL_SECONDS)
        print(f"{full}: {method} requested, still {status} (the worker acts at its next step "
              "boundary)", file=sys.stderr if wait else sys.stdout)
        return 1 if wait else 0

    return run


def cmd_delete(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        full = job_id(client, args.job)
        client.delete_job(full)
    print(f"deleted job {full} and its checkpoints")
    return 0


def cmd_lr(args: argparse.Namespace) -> int:
    value = finite_positive(args.value, "the learning rate")
    if args.wait < 0 or not math.isfinite(args.wait):
        raise UsageError(f"--wait must be a number of seconds >= 0, got {args.wait}")
    with client_of(args) as client:
        full = job_id(client, args.job)
        change = client.set_learning_rate(full, value, mode=args.mode)
        change_id = change.get("change_id")
        print(f"change {change_id}: {change.get('status')}")
        _print_preview(change)
        pending = change.get("status") == "pending"
        status = client.get_job(full).get("status") if pending else None
        if status in ("paused", "queued"):
            # No worker runs it now: the change waits for the next run (not for --wait).
            then = (f"it is resumed (`rudder resume {full[:8]}`)" if status == "paused"
                    else "it starts")
            print(f"{full[:8]} is {status}: the change applies at the first step after "
                  f"{then}", file=sys.stderr if args.wait else sys.stdout)
            return 1 if args.wait else 0
        if not args.wait:
            return 0
        return _wait_for_change(client, full, str(change_id), args.wait)


def _print_preview(change: dict[str, Any]) -> None:
    preview = change.get("preview")
    if change.get("warning"):
        print(f"warning: {change['warning']}")
    if not preview:
        return
    if preview.get("factor") is None:
        print(f"constant lr {preview['final_lr']:.6g} from the next step")
        return
    final_at = "" if preview.get("final_step") is None else f" at step {preview['final_step']}"
    # The factor multiplies the spec's schedule (it replaces an earlier scale change's).
    # Short lines: they must fit an 80-column terminal.
    print(f"scale: the spec's schedule x{preview['factor']:.4g} from here on\n"
          f"  peak {preview['peak_lr']:.4g} at step {preview['peak_step']}, "
          f"final {preview['final_lr']:.4g}{final_at}")
    if preview.get("in_warmup"):
        print(f"note: in warmup (step {preview['at_step']} of {preview['warmup_steps']}), "
              "so the peak is scaled too;\n      --mode override sets a constant instead")


def _wait_for_change(client: Client, job: str, change_id: str, seconds: float) -> int:
    """Poll the change's status until applied/rejected or ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    while True:
        changes = client.learning_rate(job).get("changes", [])
        change = next((c for c in changes if c.get("change_id") == change_id), {})
        status = change.get("status")
        if status == "applied":
            print(f"applied at step {change.get('applied_step')}: "
                  f"lr={float(change.get('applied_lr') or change['requested_lr']):.6g}")
            return 0
        if status == "rejected":
            print(f"rejected: {change.get('reason')}", file=sys.stderr)
            return 1
        if time.monotonic() >= deadline:
            print(f"still {status or 'pending'} after {seconds:g} s: the worker applies it "
                  f"at its next step boundary (`rudder logs {job[:8]}` shows the outcome)",
                  file=sys.stderr)
            return 1
        time.sleep(min(POLL_SECONDS, max(deadline - time.monotonic(), 0.01)))


def cmd_checkpoints(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        full = job_id(client, args.job)
        items = client.checkpoints(full).get("data", [])
        if args.download is not None:
            return _download(client, full, items, args.download, Path(args.out))
    if args.json:
        print_json(items)
        return 0
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("STEP", "EPOCHS", "SIZE", "SHA256"):
        table.add_column(name, justify="left" if name == "SHA256" else "right")
    for item in items:
        table.add_row(str(item["step"]), str(item.get("epoch", 0)), str(item.get("size", 0)),
                      str(item.get("sha256", ""))[:16])
    console().print(table)
    return 0


def _download(client: Client, job: str, items: list[dict[str, Any]], which: str,
              out: Path) -> int:
    steps = sorted(int(item["step"]) for item in items)
    if which != "latest" and not which.isdigit():
        raise UsageError(f"--download takes a step number or 'latest', got {which!r}")
    if not steps:
        raise UsageError(f"job {job} has no checkpoints yet")
    step = steps[-1] if which == "latest" else int(which)
    if step not in steps:
        raise UsageError(f"job {job} has no checkpoint at step {step} (it has: "
                         f"{', '.join(map(str, steps))})")
    for name in ("params.npz", "trainer.npz", "meta.json"):
        print(client.download_checkpoint(job, step, name, out / str(step) / name))
    return 0


# ------------------------------------------------------------------ local operator commands


def cmd_up(args: argparse.Namespace) -> int:
    from rudder.embedded import up

    if args.workers < 1:
        raise UsageError("--workers must be at least 1")
    return up(Path(args.home), args.host, args.port, args.queues, workers=args.workers)


def cmd_token_create(args: argparse.Namespace) -> int:
    """Issue a token straight into the database of the ``rudder up`` in ``--home``."""
    from rudder.embedded import embedded_env

    home = Path(args.home)
    if not os.environ.get("RUDDER_DATABASE_URL") and not (home / "rudder.db").is_file():
        raise UsageError(f"no Rudder database at {home / 'rudder.db'}: run this in the folder "
                         "where you ran `rudder up`, or pass --home DIR "
                         "(or set RUDDER_DATABASE_URL)")
    from core.tokens import issue_token, parse_duration

    expires_in = None
    if args.expires_in is not None:
        try:
            expires_in = parse_duration(args.expires_in)
        except ValueError as exc:
            raise UsageError(f"--expires-in: {exc}") from None
    os.environ.update({k: v for k, v in embedded_env(home).items() if k.startswith("RUDDER_")})
    _user_id, token = issue_token(args.name, label=args.label, expires_in=expires_in)
    print(token)
    return 0


def cmd_token_ls(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        rows = client.tokens().get("data", [])
    if args.json:
        print_json(rows)
        return 0
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("", "ID", "PREFIX", "LABEL", "STATUS", "CREATED", "EXPIRES"):
        table.add_column(name, no_wrap=name in ("ID", "PREFIX"), overflow="ellipsis")
    for row in rows:
        table.add_row("*" if row.get("current") else "", row["id"], row.get("prefix", ""),
                      row.get("label", ""), row.get("status", ""),
                      _minutes(row.get("created_at")), _minutes(row.get("expires_at")) or "never")
    console().print(table)
    return 0


def _minutes(timestamp: str | None) -> str:
    """``2026-11-23T05:12:09.123+00:00`` as ``2026-11-23 05:12`` (UTC)."""
    return timestamp[:16].replace("T", " ") if timestamp else ""


def cmd_token_revoke(args: argparse.Namespace) -> int:
    ref = args.token_ref.strip()
    with client_of(args) as client:
        rows = client.tokens().get("data", [])
        if ref.startswith("rdr_"):  # the shown prefix, or the whole token pasted
            matches = [r["id"] for r in rows if r.get("prefix") and ref.startswith(r["prefix"])]
            if len(matches) != 1:
                raise UsageError(f"{len(matches) or 'no'} of your tokens start with {ref[:10]!r}"
                                 "; give the token id instead (rudder token ls)")
            full = matches[0]
        else:
            full = resolve(ref, lambda: (r["id"] for r in rows), "token")
        client.revoke_token(full)
    print(f"revoked token {full}")
    return 0
