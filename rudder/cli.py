"""The ``rudder`` command line: run the service, submit, watch and steer jobs.

    rudder up                         # embedded service: prints URL and token
    rudder submit examples/digits-mlp.yaml
    rudder watch 3f0c1a               # live metrics; ids may be shortened to 6+ characters
    rudder lr 3f0c1a 0.0005 [--mode scale|override] [--wait 10]
    rudder set|schedule|freeze|unfreeze|eval|checkpoint|rules|rollback|fork JOB ...
    rudder pause|resume|cancel|delete JOB ;  rudder ls ;  rudder show JOB ;  rudder logs JOB
    rudder checkpoints JOB ;  rudder datasets upload|ls|show|rm
    rudder model upload|ls|show|rm ;  rudder export JOB
    rudder token create|ls|revoke     # create: local, --expires-in 30d; ls/revoke: your own

``--url`` / ``--token`` override ``RUDDER_URL`` / ``RUDDER_TOKEN``. Every error is one line
on stderr and a non-zero exit (2: a usage mistake, 1: the API refused or is unreachable);
``RUDDER_DEBUG=1`` shows the traceback of an unexpected one.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from rudder import __version__, dataset_commands, usage_commands
from rudder import commands as c
from rudder.client import RudderError
from rudder.model_commands import add_model_commands
from rudder.steer_commands import add_steer_commands

Formatter = argparse.RawDescriptionHelpFormatter
URL_HELP = "API URL (default $RUDDER_URL or http://127.0.0.1:8000)"
TOKEN_HELP = "API token (default $RUDDER_TOKEN)"


def _connection_options() -> argparse.ArgumentParser:
    """--url/--token, accepted after the command too (SUPPRESS: keep the global value)."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--url", default=argparse.SUPPRESS, help=URL_HELP)
    options.add_argument("--token", default=argparse.SUPPRESS, help=TOKEN_HELP)
    return options


CONNECTION = _connection_options()


def _command(sub: argparse._SubParsersAction, name: str, helptext: str, example: str,
             func: object) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=helptext, description=helptext,
                            epilog=f"example:\n  {example}", formatter_class=Formatter,
                            parents=[CONNECTION])
    parser.set_defaults(func=func)
    return parser


def _job_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", metavar="JOB",
                        help="job id, or a unique prefix of it (6 or more characters)")


def _add_job_commands(sub: argparse._SubParsersAction) -> None:
    p = _command(sub, "submit", "submit a job spec (YAML or JSON; see docs/job-spec.md)",
                 "rudder submit examples/digits-mlp.yaml", c.cmd_submit)
    p.add_argument("spec", metavar="SPEC", help="path of the job spec file")
    p.add_argument("--idempotency-key", metavar="KEY",
                   help="submitting twice with the same key creates one job")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the job id")

    p = _command(sub, "ls", "list your jobs, newest first",
                 "rudder ls --status running,queued", c.cmd_ls)
    p.add_argument("--status", metavar="STATUS[,STATUS]",
                   help="only these statuses: queued, running, paused, succeeded, failed, "
                        "cancelled")
    p.add_argument("--limit", type=int, metavar="N", help="at most N jobs (default 50)")
    p.add_argument("--json", action="store_true", help="print the API's JSON answer")

    p = _command(sub, "show", "show one job as JSON (spec, status, progress)",
                 "rudder show 3f0c1a", c.cmd_show)
    _job_arg(p)
    p = _command(sub, "watch", "follow a job live to its current state; exit code: 0 "
                 "succeeded, 1 failed, 3 cancelled, 4 paused", "rudder watch 3f0c1a",
                 c.cmd_watch)
    _job_arg(p)
    p = _command(sub, "logs", "print a job's log, status and learning-rate events",
                 "rudder logs 3f0c1a -f", c.cmd_logs)
    _job_arg(p)
    p.add_argument("-f", "--follow", action="store_true",
                   help="keep printing new events until the job finishes")

    for name, what in (("pause", "pause a running job (it checkpoints first)"),
                       ("resume", "resume a paused job from its checkpoint"),
                       ("cancel", "cancel a queued, running or paused job")):
        p = _command(sub, name, what, f"rudder {name} 3f0c1a", c.control(name))
        _job_arg(p)
        if name != "resume":
            p.add_argument("--wait", type=float, default=30.0, metavar="SECONDS",
                           help="wait up to this long for the worker to carry it out "
                                "(default 30; 0: return at once)")
    p = _command(sub, "delete", "delete a finished job with its metrics and checkpoints",
                 "rudder delete 3f0c1a", c.cmd_delete)
    _job_arg(p)

    p = _command(sub, "lr", "change a running job's learning rate from its next step",
                 "rudder lr 3f0c1a 0.0005 --mode override --wait 10", c.cmd_lr)
    _job_arg(p)
    p.add_argument("value", metavar="LR", help="the new learning rate: a finite number > 0")
    p.add_argument("--mode", choices=("scale", "override"),
                   help="with a schedule: scale (default) multiplies the rest of the schedule "
                        "so its current value becomes LR (in warmup too: the peak is "
                        "multiplied as well); override makes LR a constant")
    p.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                   help="wait up to SECONDS for the worker to apply or reject the change "
                        "(exit 1 if rejected or still pending)")

    p = _command(sub, "checkpoints", "list (or download) a job's checkpoints",
                 "rudder checkpoints 3f0c1a --download latest --out ./ckpt", c.cmd_checkpoints)
    _job_arg(p)
    p.add_argument("--download", metavar="STEP|latest",
                   help="download params.npz, trainer.npz and meta.json of that checkpoint")
    p.add_argument("--out", default=".", metavar="DIR",
                   help="where downloads go, as DIR/STEP/ (default: .)")
    p.add_argument("--json", action="store_true", help="print the API's JSON answer")


def _add_local_commands(sub: argparse._SubParsersAction) -> None:
    p = _command(sub, "up", "run the whole service here: SQLite, local store, Redis, API, "
                 "one worker (Ctrl-C stops it in order)", "rudder up --port 8001", c.cmd_up)
    p.add_argument("--home", default=".rudder", metavar="DIR",
                   help="where the database, objects, logs and token live (default .rudder)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address the API listens on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="API port (default 8000)")
    p.add_argument("--queues", default="cpu,gpu", metavar="QUEUE[,QUEUE]",
                   help="queues the embedded worker serves: cpu, gpu (default cpu,gpu)")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="worker processes to start (default 1); a job asking for "
                        "resources.workers: N trains on N of them at once")

    p = sub.add_parser("token", help="create (locally), list and revoke API tokens",
                       description="create (locally), list and revoke API tokens")
    tsub = p.add_subparsers(dest="token_command", required=True, metavar="COMMAND")
    p = _command(tsub, "create", "create a user (if needed) and print a new token "
                 "(writes the local database of `rudder up`)",
                 "rudder token create --name alice --expires-in 30d", c.cmd_token_create)
    p.add_argument("--name", default="admin", help="user name (default admin)")
    p.add_argument("--label", default="cli", help="a note kept with the token (default cli)")
    p.add_argument("--expires-in", metavar="DURATION",
                   help="the token stops working after this long: 3600, 15m, 12h, 30d, 2w "
                        "(default: never)")
    p.add_argument("--home", default=".rudder", metavar="DIR",
                   help="the folder of `rudder up` (default .rudder)")
    p = _command(tsub, "ls", "list your tokens (revoked and expired ones too); * marks the "
                 "one in use", "rudder token ls", c.cmd_token_ls)
    p.add_argument("--json", action="store_true", help="print the API's JSON answer")
    p = _command(tsub, "revoke", "revoke one of your tokens; it stops working at once",
                 "rudder token revoke 3f0c1a", c.cmd_token_revoke)
    p.add_argument("token_ref", metavar="TOKEN",
                   help="token id, a unique prefix of it (6 or more characters), or the "
                        "token's shown prefix (rdr_...)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rudder", description=__doc__,
                                     formatter_class=Formatter)
    parser.add_argument("--version", action="version", version=f"rudder {__version__}")
    parser.add_argument("--url", help=URL_HELP)
    parser.add_argument("--token", help=TOKEN_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_local_commands(sub)
    _add_job_commands(sub)
    dataset_commands.add_commands(sub, _command)
    add_model_commands(sub, _command)
    add_steer_commands(sub, _command)
    usage_commands.add_commands(sub, _command)
    return parser


def describe_error(exc: RudderError) -> str:
    """The API's message once, then what its details add: the other fields at fault (a
    422 names the first in its message), or the details' values it does not mention."""
    lines = [f"{exc.message} ({exc.status} {exc.code})"]
    details = exc.details
    if isinstance(details, list):
        for detail in details:
            if not isinstance(detail, dict) or "field" not in detail:
                continue
            line = f"{detail['field']}: {detail.get('message', 'invalid')}"
            if not exc.message.startswith(line):
                lines.append(f"  {line}")
    elif isinstance(details, dict):  # what the message does not say already
        lines.extend(f"  {key}: {value}" for key, value in details.items()
                     if str(value) not in exc.message)
    return "\n".join(lines)


def _fail(message: str, code: int) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except c.UsageError as exc:
        return _fail(str(exc), 2)
    except RudderError as exc:
        return _fail(describe_error(exc), 1)
    except BrokenPipeError:
        # The reader went away (`rudder ls | head`): stop quietly, as other tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        return _fail(str(exc), 2)
    except Exception as exc:  # noqa: BLE001 - a CLI prints the cause, not a traceback
        import httpx

        if os.environ.get("RUDDER_DEBUG"):
            raise
        if isinstance(exc, httpx.HTTPError):
            url = args.url or os.environ.get("RUDDER_URL") or "http://127.0.0.1:8000"
            return _fail(f"cannot reach the API at {url}: {exc} (is `rudder up` running?)", 1)
        return _fail(f"{type(exc).__name__}: {exc} (RUDDER_DEBUG=1 shows where)", 1)


if __name__ == "__main__":
    sys.exit(main())
