"""Checkpoint layout in object storage: write, find the latest complete one, prune.

Layout (design.md): ``jobs/{job_id}/checkpoints/{step:010d}/`` holding ``params.npz``,
``trainer.npz`` and ``meta.json``. ``meta.json`` is written last and records the sha256
of every other file, so a checkpoint is *complete* exactly when its meta.json exists and
every file hashes to what meta.json says. A worker killed half-way through a write leaves
an incomplete directory that resume ignores and pruning later removes.

Only arrays (npz, loaded with ``allow_pickle=False`` by the engine) and JSON are stored.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.storage import (
    META_FILE,
    PARAMS_FILE,
    TRAINER_FILE,
    ObjectNotFound,
    ObjectStore,
    checkpoint_keys_by_step,
    checkpoint_prefix,
    checkpoints_prefix,
    delete_checkpoint_keys,
)

log = logging.getLogger(__name__)

DATA_FILES = (PARAMS_FILE, TRAINER_FILE)
META_VERSION = 1
__all__ = ["META_FILE", "PARAMS_FILE", "TRAINER_FILE", "checkpoint_prefix"]


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class CheckpointMeta:
    """What meta.json holds: where training stood, and how to check the files."""

    job_id: str
    step: int
    epoch: int
    # Batches of ``epoch`` already trained; resume skips exactly these.
    batch_index: int
    data_seed: int
    rng_state: Any
    files: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {sha256, size}
    learning_rate: float | None = None
    created_at: float = 0.0
    # What step-boundary commands changed beyond the trainer state
    # (workers.steering.state.SteeringState as JSON; None in checkpoints from before them).
    steering: dict[str, Any] | None = None
    version: int = META_VERSION

    @property
    def sha256(self) -> str:
        """The checkpoint's headline digest: that of its weights (what the api lists)."""
        return str(self.files.get(PARAMS_FILE, {}).get("sha256", ""))

    @property
    def size(self) -> int:
        return sum(int(f["size"]) for f in self.files.values())

    def to_json(self) -> bytes:
        return json.dumps(self.__dict__, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> CheckpointMeta:
        body = json.loads(raw)
        if not isinstance(body, dict) or body.get("version") != META_VERSION:
            raise ValueError("unsupported meta.json")
        return cls(
            job_id=str(body["job_id"]),
            step=int(body["step"]),
            epoch=int(body["epoch"]),
            batch_index=int(body["batch_index"]),
            data_seed=int(body["data_seed"]),
            rng_state=body["rng_state"],
            files={str(k): dict(v) for k, v in body["files"].items()},
            learning_rate=body.get("learning_rate"),
            created_at=float(body.get("created_at", 0.0)),
            steering=body.get("steering"),
        )


@dataclass(frozen=True)
class LoadedCheckpoint:
    meta: CheckpointMeta
    params: bytes
    trainer: bytes


def write_checkpoint(
    store: ObjectStore,
    meta: CheckpointMeta,
    params: bytes,
    trainer: bytes,
    still_owner: Callable[[], bool] = lambda: True,
) -> CheckpointMeta | None:
    """Write the files, then meta.json; returns the final meta, or None when fenced off.

    ``still_owner`` is checked before every write so a worker that lost its lease stops
    writing (fencing): a checkpoint it abandons has no meta.json and is never used.
    """
    prefix = checkpoint_prefix(meta.job_id, meta.step)
    files: dict[str, dict[str, Any]] = {}
    for name, data in ((PARAMS_FILE, params), (TRAINER_FILE, trainer)):
        if not still_owner():
            return None
        store.put(prefix + name, data)
        files[name] = {"sha256": sha256_hex(data), "size": len(data)}
    final = CheckpointMeta(**{**meta.__dict__, "files": files})
    if not still_owner():
        return None
    store.put(prefix + META_FILE, final.to_json())
    return final


def list_checkpoint_steps(store: ObjectStore, job_id: str) -> list[int]:
    """Steps that have a directory in storage, complete or not, newest first."""
    return sorted(checkpoint_keys_by_step(store, job_id), reverse=True)


def load_checkpoint(store: ObjectStore, job_id: str, step: int) -> LoadedCheckpoint | None:
    """The checkpoint at ``step`` if it is complete and intact, else None."""
    prefix = checkpoint_prefix(job_id, step)
    try:
        meta = CheckpointMeta.from_json(store.get(prefix + META_FILE))
        blobs = {name: store.get(prefix + name) for name in DATA_FILES}
    except (ObjectNotFound, KeyError, ValueError, TypeError) as exc:
        log.warning("ignoring checkpoint %s: %s", prefix, exc)
        return None
    except Exception as exc:  # noqa: BLE001 - any storage error means "not usable"
        log.warning("ignoring unreadable checkpoint %s: %r", prefix, exc)
        return None
    for name, data in blobs.items():
        expected = meta.files.get(name, {}).get("sha256")
        if expected != sha256_hex(data):
            log.warning("ignoring checkpoint %s: %s does not match its sha256", prefix, name)
            return None
    if meta.step != step or meta.job_id != job_id:
        log.warning("ignoring checkpoint %s: meta.json names another step or job", prefix)
        return None
    return LoadedCheckpoint(meta=meta, params=blobs[PARAMS_FILE], trainer=blobs[TRAINER_FILE])


def latest_complete_checkpoint(store: ObjectStore, job_id: str) -> LoadedCheckpoint | None:
    """The newest checkpoint with a meta.json whose sha256s all match."""
    for step in list_checkpoint_steps(store, job_id):
        loaded = load_checkpoint(store, job_id, step)
        if loaded is not None:
            return loaded
    return None


def delete_known_checkpoint(store: ObjectStore, job_id: str, step: int) -> None:
    """Delete a checkpoint this process wrote, by name (no listing): meta.json first."""
    prefix = checkpoint_prefix(job_id, step)
    for name in (META_FILE, *DATA_FILES):
        store.delete(prefix + name)


class Pruner:
    """keep_last pruning for one run, in two halves so the DB never lists a checkpoint
    whose files are gone: :meth:`plan` names the steps to drop once a new checkpoint is
    complete, the caller removes their DB rows, then :meth:`delete` removes the files.

    The first plan lists the store once (older checkpoints, debris of a crashed run); after
    that the pruner tracks the steps it writes and needs no listing.
    """

    def __init__(self, store: ObjectStore, job_id: str, keep_last: int) -> None:
        self.store = store
        self.job_id = job_id
        self.keep_last = max(keep_last, 1)
        self._complete: list[int] | None = None  # newest first
        self._listed: dict[int, list[str]] = {}  # keys found by the first listing

    def plan(self, step: int) -> list[int]:
        """Record a new complete checkpoint at ``step``; returns the steps to remove."""
        if self._complete is None:
            self._listed = checkpoint_keys_by_step(self.store, self.job_id)
            removed = _steps_to_prune(self._listed, self.keep_last)
            kept = [s for s in sorted(self._listed, reverse=True) if s not in removed]
            self._complete = [s for s in kept if s <= step][: self.keep_last]
            return removed
        self._complete = sorted({step, *self._complete}, reverse=True)
        removed = self._complete[self.keep_last :]
        self._complete = self._complete[: self.keep_last]
        return removed

    def forget(self) -> None:
        """Drop what this pruner knows (a planned removal was not recorded): the next
        :meth:`plan` lists the store again, so nothing planned is left behind for good."""
        self._complete = None
        self._listed = {}

    def delete(self, steps: list[int]) -> None:
        for old in steps:
            keys = self._listed.pop(old, None)
            if keys is not None:
                delete_checkpoint_keys(self.store, keys)
            else:
                delete_known_checkpoint(self.store, self.job_id, old)


def _steps_to_prune(grouped: dict[int, list[str]], keep_last: int) -> list[int]:
    """Complete checkpoints beyond the newest ``keep_last``, and incomplete directories
    older than the newest complete one. Newer incomplete directories are left alone: they
    may belong to a write in progress."""
    steps = sorted(grouped, reverse=True)
    complete = [s for s in steps if any(k.endswith("/" + META_FILE) for k in grouped[s])]
    if not complete:
        return []
    keep = set(complete[: max(keep_last, 1)])
    return [s for s in steps if s not in keep and s <= complete[0]]


def sweep_interrupted_writes(store: ObjectStore, job_id: str,
                             resumed_step: int | None) -> list[int]:
    """Remove the debris of the job's previous run, which died writing a checkpoint: the
    incomplete step directories (no meta.json) newer than the checkpoint this run resumes
    from (``None``: it starts from scratch), the store's half-written temporary files and
    unfinished uploads, and the folders they leave empty. Returns the steps removed.

    Only the worker holding the job's lease calls this, before it writes anything, so no
    live write of this job can be mistaken for debris (a fenced-off one may not finish).
    """
    removed = []
    for step, keys in sorted(checkpoint_keys_by_step(store, job_id).items()):
        newer = resumed_step is None or step > resumed_step
        if newer and not any(k.endswith("/" + META_FILE) for k in keys):
            delete_checkpoint_keys(store, keys)
            removed.append(step)
    swept = store.sweep_debris(checkpoints_prefix(job_id))
    if removed or swept:
        log.info("job %s: removed %d incomplete checkpoints %s and %d leftovers of "
                 "interrupted writes", job_id, len(removed), removed, swept)
    return removed


def prune_checkpoints(store: ObjectStore, job_id: str, keep_last: int) -> list[int]:
    """Keep the newest ``keep_last`` complete checkpoints; delete older ones (and debris)
    with one listing of the store; returns the steps removed."""
    grouped = checkpoint_keys_by_step(store, job_id)
    removed = _steps_to_prune(grouped, keep_last)
    for step in removed:
        delete_checkpoint_keys(store, grouped[step])
    return removed
