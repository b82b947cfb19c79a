"""Fork a job from one of its checkpoints, roll one back, and read its lineage.

A fork is a new job (its ``parent_id`` and ``fork_step`` say where it came from) that
starts from a copy of the parent's checkpoint under its own prefix: its checkpoints,
metrics and exports are its own, and the parent is not touched. Overrides that steer
(optimizer hyperparameters, the schedule, the rules) become the child's first commands
(``source: fork``, applied at its first step, shown in its history); the others (name,
epochs, batch size, transforms, metrics, checkpoint cadence, device) go into its spec.
What cannot continue from the checkpoint's state (another model, optimizer, loss-free
data source, ...) is a 422 naming the field.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import ValidationError
from sqlalchemy.orm import Session

from api.errors import ApiError, field_error
from api.schemas.lineage import ForkRequest, LineagePublic
from api.services.commands import job_context, request_command
from api.services.jobs import enqueue_after_commit
from api.state import ServiceState
from core import repositories
from core.commands import (
    LIVE_HYPERPARAMETERS,
    Command,
    RollbackCommand,
    SetHyperparametersCommand,
    SetLRCommand,
    SetRulesCommand,
    SetScheduleCommand,
)
from core.job_status import announce_status
from core.jobspec import JobSpec, SchedulerSpec, parse_spec
from core.models import AbandonedMetricPoint, Job, JobCommand, JobStatus, User
from core.rewind import rewind_job
from core.rules import parse_rules
from core.steering import CommandRefused, outcome_event, validate
from core.storage import (
    META_FILE,
    PARAMS_FILE,
    TRAINER_FILE,
    checkpoint_file_key,
    job_objects_prefix,
)

log = logging.getLogger("rudder.api")
T = TypeVar("T")

# Spec fields a fork may change, and where each goes: into the child's spec, or into a
# command applied at its first step (the trainer state it loads would undo a spec value).
SPEC_OVERRIDES = ("name", "epochs", "metrics", "checkpoint", "device", "loss")
DATA_OVERRIDES = ("batch_size", "shuffle")
COMMAND_OVERRIDES = ("optimizer", "lr_scheduler", "rules")
# Where a fork command's field lives in the overrides.
_SECTIONS = {"set_hyperparameters": "optimizer.", "set_lr": "optimizer.",
             "set_schedule": "", "set_rules": ""}
_WHY_NOT = {
    "model": "the checkpoint's weights belong to this model; start a new job for another",
    "initializer": "the weights come from the checkpoint, so an initializer has no effect",
    "trainer": "the optimizer states in the checkpoint are laid out for this trainer",
    "seed": "the data order and random state continue from the checkpoint",
}


# ---------------------------------------------------------------- rollback


def rollback(session: Session, *, state: ServiceState, job: Job, user: User,
             command: RollbackCommand) -> JobCommand:
    """A running job rewinds at its next step boundary (its worker does it); a paused one
    is rewound now, and resumes from that checkpoint."""
    paused = job.status == JobStatus.PAUSED
    if not paused:
        return request_command(session, state=state, job=job, user=user, command=command)
    row = request_command(session, state=state, job=job, user=user, command=command,
                          send_now=False)
    outcome = rewind_job(session, state.store, job_id=job.id, to_step=command.step,
                         command_id=row.id)
    announce_status(state.channel, job.id, outcome_event(outcome))
    session.refresh(row)
    return row


# ---------------------------------------------------------------- fork


def _merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _check_overrides(overrides: dict[str, Any]) -> None:
    for key, value in overrides.items():
        if key in _WHY_NOT:
            raise field_error(f"overrides.{key}", f"cannot change in a fork: {_WHY_NOT[key]}")
        if key == "data":
            if not isinstance(value, dict):
                raise field_error("overrides.data", "must be an object")
            for part, inner in value.items():
                if part in DATA_OVERRIDES:
                    continue
                if part in ("train", "val") and isinstance(inner, dict) and set(inner) <= {
                        "transforms"}:
                    continue
                raise field_error(f"overrides.data.{part}", "a fork continues the parent's "
                                  "data order: only batch_size, shuffle and the transforms "
                                  "of train / val may change")
        elif key not in (*SPEC_OVERRIDES, *COMMAND_OVERRIDES):
            allowed = ", ".join((*SPEC_OVERRIDES, "data", *COMMAND_OVERRIDES))
            raise field_error(f"overrides.{key}", f"is not a field a fork can change "
                              f"(allowed: {allowed})")


def _parsed(prefix: str, build: Callable[[], T]) -> T:
    """``build()``, its validation error a 422 naming the field under ``prefix``."""
    try:
        return build()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = [str(p) for p in first["loc"] if not str(p)[:1].isupper()]
        if prefix.endswith(".rules") and where and where[0] == "rules":
            where = where[1:]  # parse_rules wraps the list in {rules: [...]}
        raise field_error(".".join([prefix, *where]),
                          str(first["msg"]).removeprefix("Value error, ")) from None


def _fork_commands(parent_spec: JobSpec, overrides: dict[str, Any]) -> list[Command]:
    """The steering overrides as the child's first commands (validated like a user's)."""
    commands: list[Command] = []
    optimizer = dict(overrides.get("optimizer") or {})
    if "type" in optimizer and str(optimizer["type"]).lower() != parent_spec.optimizer.type:
        raise field_error("overrides.optimizer.type", "the optimizer states in the "
                          "checkpoint belong to " + parent_spec.optimizer.type)
    optimizer.pop("type", None)
    learning_rate = optimizer.pop("learning_rate", None)
    values = {k: optimizer.pop(k) for k in list(optimizer) if k in LIVE_HYPERPARAMETERS}
    if optimizer:
        name = sorted(optimizer)[0]
        raise field_error(f"overrides.optimizer.{name}", "cannot change from a checkpoint; "
                          f"a fork can change {', '.join(LIVE_HYPERPARAMETERS)} and "
                          "learning_rate")
    if values:
        commands.append(_parsed("overrides.optimizer",
                                lambda: SetHyperparametersCommand.model_validate(values)))
    if overrides.get("lr_scheduler") is not None:
        scheduler = _parsed("overrides.lr_scheduler",
                            lambda: SchedulerSpec.model_validate(overrides["lr_scheduler"]))
        commands.append(_parsed("overrides.optimizer", lambda: SetScheduleCommand(
            lr_scheduler=scheduler, learning_rate=learning_rate)))
    elif "lr_scheduler" in overrides:  # null: a constant learning rate from here on
        if learning_rate is None:
            raise field_error("overrides.optimizer.learning_rate", "give the constant "
                              "learning rate with lr_scheduler: null")
        commands.append(_parsed("overrides.optimizer", lambda: SetLRCommand(
            learning_rate=learning_rate, mode="override")))
    elif learning_rate is not None:
        commands.append(_parsed("overrides.optimizer", lambda: SetLRCommand(
            learning_rate=learning_rate, mode="scale")))
    if "rules" in overrides:
        rules = _parsed("overrides.rules", lambda: parse_rules(overrides["rules"] or []))
        commands.append(SetRulesCommand(rules=rules))
    return [c.model_copy(update={"source": "fork"}) for c in commands]


def _child_spec(parent: Job, overrides: dict[str, Any], epochs_done: int) -> JobSpec:
    structural = {k: v for k, v in overrides.items() if k not in COMMAND_OVERRIDES}
    structural.setdefault("name", f"{parent.name}-fork")
    try:
        spec = parse_spec(_merge(parent.spec, structural))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"] if not str(p)[:1].isupper())
        raise field_error(f"overrides.{where}" if where else "overrides", first["msg"]) from None
    if spec.epochs <= epochs_done:
        raise field_error("overrides.epochs", f"the checkpoint has done {epochs_done} epochs; "
                          "the fork must train more")
    return spec


def _copy_checkpoint(state: ServiceState, parent: Job, child_id: str, step: int,
                     batch_sizes: tuple[int, int]) -> dict[str, dict[str, Any]]:
    """The parent's checkpoint under the child's prefix (meta.json names the child);
    returns the files' digests for the child's checkpoint row. With another batch size
    the child goes on from the same sample of the epoch's order, rounded down to a whole
    batch of its own size."""
    store = state.store
    files: dict[str, dict[str, Any]] = {}
    for name in (PARAMS_FILE, TRAINER_FILE):
        data = store.get(checkpoint_file_key(parent.id, step, name))
        store.put(checkpoint_file_key(child_id, step, name), data)
        files[name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    meta = json.loads(store.get(checkpoint_file_key(parent.id, step, META_FILE)))
    meta["job_id"] = child_id
    old, new = batch_sizes
    meta["batch_index"] = int(meta["batch_index"]) * old // new
    raw = json.dumps(meta, sort_keys=True).encode()
    store.put(checkpoint_file_key(child_id, step, META_FILE), raw)  # written last
    files[META_FILE] = {"sha256": hashlib.sha256(raw).hexdigest(), "size": len(raw)}
    return files


def fork(session: Session, *, state: ServiceState, parent: Job, user: User,
         body: ForkRequest) -> Job:
    checkpoints = repositories.list_checkpoints(session, job_id=parent.id)
    if not checkpoints:
        raise field_error("checkpoint", "the job has no checkpoint yet to fork from",
                          status_code=409)
    if body.step is not None:
        chosen = next((c for c in checkpoints if c.step == body.step), None)
        if chosen is None:
            kept = ", ".join(str(c.step) for c in checkpoints)
            raise field_error("step", f"the job has no checkpoint at step {body.step} "
                              f"(kept: {kept})")
    else:
        chosen = checkpoints[-1]
    overrides = dict(body.overrides)
    _check_overrides(overrides)
    spec = _child_spec(parent, overrides, chosen.epoch)
    commands = _fork_commands(JobSpec.model_validate(parent.spec), overrides)
    child = repositories.create_job(
        session, owner_id=user.id, name=spec.name, spec=spec.model_dump(mode="json"),
        queue=spec.queue(default=state.settings.default_queue), current_lr=parent.current_lr,
        parent_id=parent.id, fork_step=chosen.step, epoch=chosen.epoch, step=chosen.step)
    child.parameters = parent.parameters
    context = job_context(session, state, child)
    for command in commands:
        try:
            validate(command, context)
        except CommandRefused as error:
            section = _SECTIONS.get(command.type, "")
            raise field_error(f"overrides.{section}{error.field}", error.message) from None
        repositories.create_command(session, job_id=child.id, command=command.model_copy(
            update={"requested_by": user.id}))
    try:
        files = _copy_checkpoint(state, parent, child.id, chosen.step, (
            JobSpec.model_validate(parent.spec).data.batch_size, spec.data.batch_size))
    except Exception as exc:
        state.store.delete_prefix(job_objects_prefix(child.id))  # no half-copied debris
        if isinstance(exc, KeyError):  # the parent pruned it meanwhile
            raise ApiError(409, "conflict", f"checkpoint {chosen.step} of job {parent.id} is "
                           "gone (pruned while forking); fork from a later one") from exc
        raise
    repositories.add_checkpoint(session, job_id=child.id, step=chosen.step,
                                epoch=chosen.epoch, key_prefix=chosen.key_prefix.replace(
                                    parent.id, child.id), files=files)
    session.commit()
    enqueue_after_commit(state, child)
    return child


# ---------------------------------------------------------------- lineage


def lineage(session: Session, *, job: Job) -> LineagePublic:
    parent = None
    if job.parent_id is not None:
        found = repositories.get_job(session, job_id=job.parent_id, owner_id=job.owner_id)
        parent = {"id": job.parent_id, "fork_step": job.fork_step, "exists": found is not None,
                  "name": found.name if found else None,
                  "status": found.status if found else None}
    children = [{"id": c.id, "name": c.name, "status": c.status, "fork_step": c.fork_step}
                for c in repositories.list_children(session, job_id=job.id)]
    rollbacks = [{"command_id": r.id, "branch": (r.result or {}).get("branch"),
                  "to_step": (r.result or {}).get("to_step"), "at": r.applied_at,
                  "abandoned_points": (r.result or {}).get("abandoned_points")}
                 for r in repositories.list_commands(session, job_id=job.id,
                                                     kinds=["rollback"], statuses=["applied"])]
    return LineagePublic.model_validate({"job_id": job.id, "parent": parent,
                                         "children": children, "branch": job.branch,
                                         "rollbacks": rollbacks})



def abandoned_points(session: Session, *, job: Job, branch: int | None, limit: int,
                     after: tuple[Any, ...] | None) -> list[AbandonedMetricPoint]:
    return repositories.list_abandoned_points(
        session, job_id=job.id, branch=branch, limit=limit,
        after=None if after is None else (int(after[0]), int(after[1]), str(after[2])))
