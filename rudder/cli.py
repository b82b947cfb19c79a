"""The ``rudder`` command line: run the service, submit, watch and steer jobs.

    rudder up                         # embedded service: prints URL and token
    rudder submit examples/digits-mlp.yaml
    rudder watch JOB                  # live metrics with a progress bar
    rudder lr JOB 0.0005 [--mode scale|override]
    rudder pause|resume|cancel JOB ;  rudder ls ;  rudder show JOB ;  rudder checkpoints JOB

``--url`` / ``--token`` override ``RUDDER_URL`` / ``RUDDER_TOKEN``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from rudder.client import Client, RudderError, ServerEvent

TERMINAL = ("succeeded", "failed", "cancelled")


def _client(args: argparse.Namespace) -> Client:
    return Client(url=args.url, token=args.token)


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True, default=str))


def _jobs_of(body: Any) -> list[dict[str, Any]]:
    if isinstance(body, dict):
        for key in ("items", "data", "jobs"):
            if isinstance(body.get(key), list):
                return list(body[key])
    return list(body) if isinstance(body, list) else []


# ------------------------------------------------------------------ commands


def cmd_up(args: argparse.Namespace) -> int:
    from rudder.embedded import up

    return up(Path(args.home), args.host, args.port, args.queues)


def cmd_submit(args: argparse.Namespace) -> int:
    text = Path(args.spec).read_text()
    spec = yaml.safe_load(text)
    if not isinstance(spec, dict):
        print(f"{args.spec}: a job spec is a YAML mapping", file=sys.stderr)
        return 2
    with _client(args) as client:
        job = client.submit(spec, idempotency_key=args.idempotency_key)
    print(job["id"] if args.quiet else f"submitted {job['id']} ({job.get('status')})")
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    with _client(args) as client:
        body = client.list_jobs(status=args.status, limit=args.limit)
    jobs = _jobs_of(body)
    if args.json:
        _print_json(body)
        return 0
    print(f"{'ID':36}  {'NAME':20} {'STATUS':10} {'EPOCHS':>6} {'STEP':>8} {'LR':>10}")
    for job in jobs:
        progress = job.get("progress") or job
        lr = progress.get("current_lr")
        print(f"{job['id']:36}  {str(job.get('name'))[:20]:20} {job.get('status', ''):10} "
              f"{progress.get('epoch', 0):>6} {progress.get('step', 0):>8} "
              f"{'' if lr is None else f'{lr:.3g}':>10}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    with _client(args) as client:
        _print_json(client.get_job(args.job))
    return 0


def _control(method: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        with _client(args) as client:
            body = getattr(client, method)(args.job)
        print(f"{args.job}: {body.get('status', method) if isinstance(body, dict) else method}")
        return 0

    return run


def cmd_lr(args: argparse.Namespace) -> int:
    try:
        value = float(args.value)
    except ValueError:
        print(f"not a number: {args.value!r}", file=sys.stderr)
        return 2
    with _client(args) as client:
        change = client.set_learning_rate(args.job, value, mode=args.mode)
        print(f"change {change.get('change_id')}: {change.get('status')}")
        if not args.wait:
            return 0
        for event in client.events(args.job, timeout=args.wait):
            if event.type == "lr" and event.data.get("change_id") == change.get("change_id"):
                print(f"applied at step {event.data['applied_step']}: "
                      f"lr={event.data['learning_rate']:.6g}")
                return 0
    return 1


def cmd_checkpoints(args: argparse.Namespace) -> int:
    with _client(args) as client:
        body = client.checkpoints(args.job)
        items = _jobs_of(body)
        if args.download is not None:
            if not items:
                print("no checkpoints", file=sys.stderr)
                return 1
            step = int(args.download) if args.download != "latest" else max(
                int(item["step"]) for item in items)
            for name in ("params.npz", "trainer.npz", "meta.json"):
                path = client.download_checkpoint(args.job, step, name,
                                                  Path(args.out) / str(step) / name)
                print(path)
            return 0
    if args.json:
        _print_json(body)
        return 0
    print(f"{'STEP':>10} {'EPOCHS':>6} {'SIZE':>10}  SHA256")
    for item in items:
        print(f"{item['step']:>10} {item.get('epoch', 0):>5} {item.get('size', 0):>10}  "
              f"{str(item.get('sha256', ''))[:16]}")
    return 0


def cmd_token_create(args: argparse.Namespace) -> int:
    """Issue a token straight into the local database (the operator's command)."""
    from core.tokens import issue_token

    _user_id, token = issue_token(args.name, label=args.label)
    print(token)
    return 0


# ------------------------------------------------------------------ watch


class ProgressLine:
    """One redrawn terminal line: a bar over epochs plus the latest values."""

    def __init__(self, epochs: int, width: int = 30) -> None:
        self.epochs = max(epochs, 1)
        self.width = width
        self.steps_per_epoch: int | None = None
        self.values: dict[str, float] = {}
        self.step = 0
        self.epoch = 0

    def update(self, data: dict[str, Any]) -> str:
        """Fold in one metric event (``epoch`` is 0-based: the epoch being trained)."""
        self.step, self.epoch = int(data.get("step", 0)), int(data.get("epoch", 0))
        values = data.get("values") or {}
        self.values.update(values)
        if self.steps_per_epoch is None and any(k.startswith("val_") for k in values):
            # An epoch-end event: `epoch + 1` epochs took `step` steps.
            self.steps_per_epoch = max(self.step // (self.epoch + 1), 1)
        done = float(self.epoch)
        if self.steps_per_epoch:
            done = self.step / self.steps_per_epoch
        fraction = min(done / self.epochs, 1.0)
        filled = int(math.floor(fraction * self.width))
        bar = "#" * filled + "." * (self.width - filled)
        shown = " ".join(f"{k}={v:.4g}" for k, v in sorted(self.values.items()))
        shown_epoch = min(self.epoch + 1, self.epochs)
        return (f"[{bar}] {fraction:4.0%} epoch {shown_epoch}/{self.epochs} step {self.step} "
                f"{shown}")


def cmd_watch(args: argparse.Namespace) -> int:
    with _client(args) as client:
        job = client.get_job(args.job)
        epochs = int((job.get("spec") or {}).get("epochs") or 1)
        line = ProgressLine(epochs)
        interactive = sys.stdout.isatty()
        for event in client.events(args.job):
            code = _render(event, line, interactive)
            if code is not None:
                return code
    return 0


def _render(event: ServerEvent, line: ProgressLine, interactive: bool) -> int | None:
    data = event.data if isinstance(event.data, dict) else {}
    if event.type == "metric":
        text = line.update(data)
        print(("\r" + text) if interactive else text, end="" if interactive else "\n",
              flush=True)
        return None
    prefix = "\n" if interactive else ""
    if event.type == "lr":
        print(f"{prefix}lr -> {data.get('learning_rate')} ({data.get('mode')}) at step "
              f"{data.get('applied_step')} [change {data.get('change_id')}]", flush=True)
    elif event.type == "checkpoint":
        print(f"{prefix}checkpoint at step {data.get('step')} ({data.get('size')} bytes)",
              flush=True)
    elif event.type == "log":
        print(f"{prefix}{data.get('level')}: {data.get('message')}", flush=True)
    elif event.type == "status":
        status = data.get("status")
        reason = f" ({data['reason']})" if data.get("reason") else ""
        print(f"{prefix}status: {status}{reason}", flush=True)
        if status in TERMINAL or status == "paused":
            return 1 if status == "failed" else 0
    return None


# ------------------------------------------------------------------ parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rudder", description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="API URL (default $RUDDER_URL or http://127.0.0.1:8000)")
    parser.add_argument("--token", help="API token (default $RUDDER_TOKEN)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("up", help="run the embedded service (SQLite, local store, Redis)")
    p.add_argument("--home", default=".rudder")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--queues", default="cpu,gpu", help="queues the embedded worker serves")
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("submit", help="submit a job spec (YAML or JSON)")
    p.add_argument("spec")
    p.add_argument("--idempotency-key")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the job id")
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("ls", help="list jobs")
    p.add_argument("--status")
    p.add_argument("--limit", type=int)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_ls)

    for name, helptext in (("show", "show one job"), ("watch", "live metrics of a job")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("job")
        p.set_defaults(func=cmd_show if name == "show" else cmd_watch)

    for name in ("pause", "resume", "cancel"):
        p = sub.add_parser(name, help=f"{name} a job")
        p.add_argument("job")
        p.set_defaults(func=_control(name))

    p = sub.add_parser("lr", help="change a running job's learning rate")
    p.add_argument("job")
    p.add_argument("value")
    p.add_argument("--mode", choices=("scale", "override"))
    p.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                   help="wait up to SECONDS for the worker's confirmation")
    p.set_defaults(func=cmd_lr)

    p = sub.add_parser("checkpoints", help="list (or download) a job's checkpoints")
    p.add_argument("job")
    p.add_argument("--download", metavar="STEP|latest")
    p.add_argument("--out", default=".")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_checkpoints)

    p = sub.add_parser("token", help="manage API tokens (local database)")
    token_sub = p.add_subparsers(dest="token_command", required=True)
    p = token_sub.add_parser("create", help="create a user (if needed) and a new token")
    p.add_argument("--name", default="admin", help="user name")
    p.add_argument("--label", default="cli")
    p.set_defaults(func=cmd_token_create)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except RudderError as exc:
        print(f"error: {exc.message} ({exc.status} {exc.code})", file=sys.stderr)
        if exc.details:
            print(json.dumps(exc.details, indent=2, default=str), file=sys.stderr)
        return 1
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except yaml.YAMLError as exc:
        print(f"error: not valid YAML: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - a CLI prints the cause, not a traceback
        import httpx

        if isinstance(exc, httpx.HTTPError):
            print(f"error: cannot reach the API: {exc}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
