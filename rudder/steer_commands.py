"""Steering beyond the learning rate (issue 24): each command goes to the job's next step
boundary and, with ``--wait``, this waits for the worker's answer (the step it took
effect from, or why it was refused; exit 1 then).

    rudder set 3f0c1a wd=1e-4 momentum=0.95 --wait 10     # lr=... too (set_lr)
    rudder schedule 3f0c1a cosine max_update=2000 --lr 0.001
    rudder freeze 3f0c1a 'dense0_.*' ;  rudder unfreeze 3f0c1a 'dense0_.*'
    rudder eval 3f0c1a ;  rudder checkpoint 3f0c1a
    rudder rules 3f0c1a rules.yaml                         # replace the job's rules
    rudder rollback 3f0c1a 1200 ;  rudder fork 3f0c1a --step 1200 --set optimizer.wd=1e-3
    rudder hyperparameters 3f0c1a ;  rudder lineage 3f0c1a
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from rudder.client import Client
from rudder.commands import (
    POLL_SECONDS,
    UsageError,
    client_of,
    job_id,
    print_json,
)

AddCommand = Callable[..., argparse.ArgumentParser]
_LR_KEYS = ("lr", "learning_rate")


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{what} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise UsageError(f"{what} must be finite, got {text!r}")
    return value


def _pairs(items: list[str]) -> dict[str, str]:
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"expected NAME=VALUE, got {item!r}")
        pairs[key.strip()] = value.strip()
    return pairs


def _yaml_value(text: str) -> Any:
    """``1e-4`` -> 0.0001, ``true`` -> True, ``[1, 2]`` -> [1, 2]: values as in a spec."""
    value = yaml.safe_load(text)
    if isinstance(value, str):  # YAML 1.1 reads 1e-4 as a string
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _check_wait(seconds: float) -> None:
    if seconds < 0 or not math.isfinite(seconds):
        raise UsageError(f"--wait must be a number of seconds >= 0, got {seconds}")


def _describe(command: dict[str, Any]) -> str:
    result = command.get("result") or {}
    shown = ", ".join(f"{k}={v}" for k, v in result.items() if k != "values")
    if "values" in result:
        shown = ", ".join(f"{k}={v:.4g}" for k, v in result["values"].items())
    return shown


def wait_for(client: Client, job: str, command_id: str, seconds: float) -> int:
    """Poll the command until applied or rejected, or ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    while True:
        command = client.command(job, command_id)
        status = command.get("status")
        if status == "applied":
            detail = _describe(command)
            print(f"applied at step {command.get('applied_step')}"
                  + (f": {detail}" if detail else ""))
            return 0
        if status == "rejected":
            print(f"rejected: {command.get('reason')}", file=sys.stderr)
            return 1
        if time.monotonic() >= deadline:
            print(f"still {status} after {seconds:g} s: the worker applies it at its next "
                  f"step boundary (a queued or paused job: when it starts)", file=sys.stderr)
            return 1
        time.sleep(min(POLL_SECONDS, max(deadline - time.monotonic(), 0.01)))


def _send(args: argparse.Namespace, body: dict[str, Any]) -> int:
    _check_wait(args.wait)
    if getattr(args, "checkpoint_before", False):
        body["checkpoint_before"] = True
    with client_of(args) as client:
        full = job_id(client, args.job)
        accepted = client.send_command(full, body)
        print(f"{accepted['kind']} {accepted['command_id']}: {accepted['status']}")
        if not args.wait or accepted["status"] != "pending":
            return 0
        return wait_for(client, full, accepted["command_id"], args.wait)


def cmd_set(args: argparse.Namespace) -> int:
    values = {k: _number(v, k) for k, v in _pairs(args.values).items()}
    rate = next((values.pop(k) for k in _LR_KEYS if k in values), None)
    if rate is None and not values:
        raise UsageError("give at least one NAME=VALUE (wd, momentum, beta1, beta2, epsilon, "
                         "clip_gradient, lr)")
    codes = []
    if rate is not None:
        body: dict[str, Any] = {"type": "set_lr", "learning_rate": rate}
        if args.mode:
            body["mode"] = args.mode
        codes.append(_send(args, body))
    if values:
        codes.append(_send(args, {"type": "set_hyperparameters", **values}))
    return max(codes)


def cmd_schedule(args: argparse.Namespace) -> int:
    scheduler = {"type": args.schedule_type,
                 **{k: _yaml_value(v) for k, v in _pairs(args.params).items()}}
    body: dict[str, Any] = {"type": "set_schedule", "lr_scheduler": scheduler}
    if args.lr is not None:
        body["learning_rate"] = _number(args.lr, "--lr")
    return _send(args, body)


def pattern_command(kind: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        return _send(args, {"type": kind, "pattern": args.pattern})
    return run


def action_command(kind: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        return _send(args, {"type": kind})
    return run


def cmd_rules(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
    try:
        rules = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"{args.file} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if isinstance(rules, dict) and "rules" in rules:
        rules = rules["rules"]
    if not isinstance(rules, list):
        raise UsageError(f"{args.file}: a list of rules (or {{rules: [...]}})")
    return _send(args, {"type": "set_rules", "rules": rules})


def cmd_rollback(args: argparse.Namespace) -> int:
    _check_wait(args.wait)
    with client_of(args) as client:
        full = job_id(client, args.job)
        accepted = client.rollback(full, args.step)
        print(f"rollback {accepted['command_id']}: {accepted['status']}")
        if accepted["status"] == "applied":
            return wait_for(client, full, accepted["command_id"], 0)
        return wait_for(client, full, accepted["command_id"], args.wait) if args.wait else 0


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if args.file:
        loaded = yaml.safe_load(Path(args.file).read_text()) or {}
        if not isinstance(loaded, dict):
            raise UsageError(f"{args.file}: overrides are a YAML mapping")
        overrides.update(loaded)
    for path, text in _pairs(args.set or []).items():
        node = overrides
        *parents, leaf = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise UsageError(f"--set {path}: {key} is not a section")
        node[leaf] = _yaml_value(text)
    return overrides


def cmd_fork(args: argparse.Namespace) -> int:
    overrides = _overrides(args)
    with client_of(args) as client:
        full = job_id(client, args.job)
        child = client.fork(full, step=args.step, overrides=overrides)
    print(child["id"] if args.quiet else
          f"forked {child['id']} from {full} at step {child.get('fork_step')} "
          f"({child.get('status')})")
    return 0


def cmd_hyperparameters(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        body = client.hyperparameters(job_id(client, args.job))
    if args.json:
        print_json(body)
        return 0
    values = ", ".join(f"{k}={v}" for k, v in body["values"].items())
    rate = body.get("learning_rate")
    print(f"{body['optimizer']}: lr={'?' if rate is None else f'{rate:.4g}'}, {values}")
    schedule = body.get("schedule")
    print("schedule: " + ("constant" if schedule is None else
                          f"{schedule['type']} {_shown(schedule['params'])} from step "
                          f"{schedule['from_step']}"))
    print("frozen: " + (", ".join(body["frozen"]) or "none"))
    print("rules: " + (", ".join(r.get("name") or r["type"] for r in body["rules"]) or "none"))
    for change in body["changes"]:
        where = (f"step {change['applied_step']}" if change["status"] == "applied"
                 else change["status"])
        print(f"  {where:>12}  {change['kind']:<20} {_shown(change['params'])}  by "
              f"{change['by']}" + (f"  ({change['reason']})" if change.get("reason") else ""))
    return 0


def _shown(params: dict[str, Any]) -> str:
    """A command's parameters on one line: rules by name, a schedule by its values."""
    parts = []
    for key, value in params.items():
        if key == "rules":
            value = ",".join(r.get("name") or r["type"] for r in value) or "none"
        elif key == "lr_scheduler":
            value = " ".join([value["type"], *(f"{k}={v}" for k, v in value.items()
                                              if k != "type")])
        parts.append(f"{key}={value}")
    return " ".join(parts)


def cmd_lineage(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        body = client.lineage(job_id(client, args.job))
    if args.json:
        print_json(body)
        return 0
    parent = body.get("parent")
    if parent:
        gone = "" if parent["exists"] else " (deleted)"
        print(f"parent: {parent['id']}{gone} at step {parent['fork_step']}")
    for child in body["children"]:
        print(f"child:  {child['id']} from step {child['fork_step']} ({child['status']})")
    for rollback in body["rollbacks"]:
        print(f"rollback to step {rollback['to_step']}: branch {rollback['branch']} "
              f"({rollback['abandoned_points']} points set aside)")
    if not (parent or body["children"] or body["rollbacks"]):
        print("no parent, no children, no rollbacks")
    return 0


def add_steer_commands(sub: argparse._SubParsersAction, command: AddCommand) -> None:
    def job(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("job", metavar="JOB", help="job id, or a unique prefix of it")

    def waits(parser: argparse.ArgumentParser, before: bool = True) -> None:
        parser.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                            help="wait up to SECONDS for the worker to apply or reject it "
                                 "(exit 1 if rejected or still pending)")
        if before:
            parser.add_argument("--checkpoint-before", action="store_true",
                                help="checkpoint at the step before it applies (to roll "
                                     "back to exactly)")

    p = command(sub, "set", "set optimizer hyperparameters of a running job from its next "
                "step (those its optimizer has: wd, momentum, beta1, beta2, epsilon, "
                "clip_gradient; lr too)", "rudder set 3f0c1a wd=1e-4 momentum=0.95 --wait 10",
                cmd_set)
    job(p)
    p.add_argument("values", nargs="+", metavar="NAME=VALUE",
                   help="e.g. wd=1e-4 momentum=0.95 clip_gradient=0 (0: off) lr=0.001")
    p.add_argument("--mode", choices=("scale", "override"), help="for lr=: as `rudder lr`")
    waits(p)
    p = command(sub, "schedule", "replace the learning-rate schedule from the next step "
                "(its step 1 is the job's next step)",
                "rudder schedule 3f0c1a cosine max_update=2000 --lr 0.001", cmd_schedule)
    job(p)
    p.add_argument("schedule_type", metavar="TYPE", help="factor, multifactor, poly, cosine")
    p.add_argument("params", nargs="*", metavar="NAME=VALUE",
                   help="the schedule's parameters (docs/job-spec.md), e.g. max_update=2000")
    p.add_argument("--lr", help="its base learning rate (default: the lr in effect)")
    waits(p)
    for kind, what in (("freeze", "stop updating the parameters whose names match PATTERN "
                        "(a regular expression from the start of the name)"),
                       ("unfreeze", "update again the frozen parameters matching PATTERN")):
        p = command(sub, kind, what, f"rudder {kind} 3f0c1a 'dense0_.*' --wait 10",
                    pattern_command(kind))
        job(p)
        p.add_argument("pattern", metavar="PATTERN",
                       help="e.g. 'net_dense0_' or 'resnet.*features'")
        waits(p)
    p = command(sub, "eval", "run a validation pass at the next step boundary",
                "rudder eval 3f0c1a --wait 30", action_command("evaluate"))
    job(p)
    waits(p, before=False)
    p = command(sub, "checkpoint", "take a checkpoint at the next step boundary",
                "rudder checkpoint 3f0c1a --wait 30", action_command("checkpoint"))
    job(p)
    waits(p, before=False)
    p = command(sub, "rules", "replace the job's rules (reduce_on_plateau, early_stop, "
                "guard; see docs/job-spec.md)", "rudder rules 3f0c1a rules.yaml", cmd_rules)
    job(p)
    p.add_argument("file", metavar="FILE", help="YAML: a list of rules, or {rules: [...]}; "
                   "- reads stdin; an empty list removes them")
    waits(p)
    p = command(sub, "rollback", "rewind a running or paused job to one of its checkpoints; "
                "later metric points are kept as an abandoned branch",
                "rudder rollback 3f0c1a 1200 --wait 30", cmd_rollback)
    job(p)
    p.add_argument("step", type=int, metavar="STEP", help="a kept checkpoint's step "
                   "(rudder checkpoints JOB)")
    waits(p, before=False)
    p = command(sub, "fork", "start a new job from one of a job's checkpoints, with "
                "overrides; the job itself is not touched",
                "rudder fork 3f0c1a --step 1200 --set optimizer.wd=1e-3 --set epochs=40",
                cmd_fork)
    job(p)
    p.add_argument("--step", type=int, help="the checkpoint's step (default: the latest)")
    p.add_argument("--set", action="append", metavar="FIELD=VALUE",
                   help="a spec override, e.g. optimizer.learning_rate=0.01 (repeatable)")
    p.add_argument("-f", "--file", help="overrides as a YAML mapping (a partial spec)")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the new job's id")
    for name, func, what in (
            ("hyperparameters", cmd_hyperparameters,
             "what a job trains with now, and every change with its step"),
            ("lineage", cmd_lineage, "a job's parent, children and rollbacks")):
        p = command(sub, name, what, f"rudder {name} 3f0c1a", func)
        job(p)
        p.add_argument("--json", action="store_true", help="print the API's JSON answer")
