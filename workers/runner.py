"""Train one job: spec -> engine objects -> resume -> the training loop with our hooks.

The runner knows nothing about Celery, and talks to Redis and the DB only through
:class:`~workers.jobio.JobIO`, so it runs the same in a worker, a test or a benchmark.

Exact resume (design.md: on CPU a killed-and-resumed job ends with the same weights as an
uninterrupted one) rests on four things restored from the checkpoint: parameters, trainer
state (optimizer states, update count, schedule and live-LR changes), the engine's RNG
state, and the position in the data order (epoch + batches done; the loader's shuffle is a
pure function of (seed, epoch)). What step-boundary commands changed beyond the trainer
state (frozen parameters, a replaced schedule, the rules) is in the checkpoint's meta.json
(:mod:`workers.steering`); commands confirmed after the checkpoint are replayed at the
step where they first took effect.
"""

from __future__ import annotations

import io
import logging
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

import engine
import engine.gluon.loss
import engine.initializer
import engine.metric
import engine.random
from core.commands import Command, RollbackCommand
from core.events import LogEvent
from core.jobspec import JobSpec, parse_spec
from core.storage import ObjectStore, checkpoint_prefix
from engine.ndarray.creation import array
from workers import build, data_sources, networks
from workers.checkpoint_writer import CheckpointWriter
from workers.checkpoints import (
    META_FILE,
    CheckpointMeta,
    LoadedCheckpoint,
    Pruner,
    latest_complete_checkpoint,
    sha256_hex,
    sweep_interrupted_writes,
    write_checkpoint,
)
from workers.data_sources import StoredDataset
from workers.hooks import (
    STOP_CANCEL,
    STOP_LEASE_LOST,
    STOP_PAUSE,
    STOP_ROLLBACK,
    STOP_SHUTDOWN,
    LoopState,
    Pacing,
    ServiceHandler,
)
from workers.jobio import JobIO
from workers.loop import evaluate, run_epochs
from workers.steering.boundary import Steering

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunResult:
    """How a run ended: succeeded | paused | cancelled | interrupted | lease_lost |
    rolled_back (``rollback`` says to which checkpoint)."""

    outcome: str
    step: int
    epoch: int
    final_metrics: dict[str, float] = field(default_factory=dict)
    command_id: str | None = None  # the command that ended the run
    reason: str | None = None  # a rule's reason (early stop, a guard's pause)
    rollback: RollbackCommand | None = None


@dataclass(frozen=True)
class ReplayedCommand:
    """A command confirmed after the checkpoint we resume from: re-applied at its step,
    not re-sent."""

    applied_step: int
    command: Command


class JobRunner:
    """Builds the job's engine objects from its spec and trains it to an outcome.

    >>> result = JobRunner("job-1", spec, store, job_io).run()  # doctest: +SKIP
    """

    def __init__(
        self,
        job_id: str,
        spec: JobSpec | Mapping[str, Any],
        store: ObjectStore,
        job_io: JobIO,
        *,
        load_upload: Callable[[str], bytes] | None = None,
        lookup_dataset: Callable[[str], StoredDataset] | None = None,
        data_cache: Path | None = None,
        replay: list[ReplayedCommand] | None = None,
        pacing: Pacing | None = None,
        branch: int = 0,
        on_built: Callable[[list[dict[str, Any]]], None] | None = None,
    ) -> None:
        self.job_id = job_id
        # Built from the validated spec only: its defaults are the schema's, not ours.
        self.spec = spec if isinstance(spec, JobSpec) else _validated(spec)
        self.store = store
        self.io = job_io
        self.state = LoopState()
        self._writer = CheckpointWriter(job_id)
        self._replay = sorted(replay or [], key=lambda r: r.applied_step)
        self.branch = branch
        self._on_built = on_built
        self._load_upload = load_upload or _no_uploads
        self._lookup_dataset = lookup_dataset or _no_datasets
        self._data_cache = data_cache or Path(tempfile.gettempdir()) / "rudder-cache"
        self.pacing = pacing or Pacing()
        self.loop_seconds = 0.0  # time inside the training loop, for logs and benchmarks
        self.checkpoint_every = self.spec.checkpoint.every_steps
        self.keep_last = self.spec.checkpoint.keep_last
        self._pruner = Pruner(store, job_id, self.keep_last)
        self.data_seed = self.spec.seed
        # The batch size trainer.step() normalises by, from the batch's index in its epoch
        # (None: the batch's own size; a distributed rank's is the global batch's).
        self.step_size: Callable[[int], int] | None = None

    # ---------------------------------------------------------------- building
    def _build_data(self, spec: JobSpec) -> Any:
        """The train/val loaders; returns one input batch for materialising shapes."""
        data_spec = spec.data
        batch_size, shuffle = data_spec.batch_size, data_spec.shuffle
        if data_sources.is_image_source(data_spec.train, self._lookup_dataset):
            cache = data_sources.DatasetCache(self._data_cache, self.store)
            splits = data_sources.image_splits(data_spec, cache, self._lookup_dataset,
                                               seed=self.data_seed)
            self.train_data, self.val_data = splits.train, splits.val
            return splits.sample.as_in_context(self.ctx)
        train_x, train_y, val = self._arrays(spec)
        self.train_data = build.make_loader(train_x, train_y, batch_size, shuffle,
                                            self.data_seed, self.ctx)
        self.val_data = None
        if val is not None:
            self.val_data = build.make_loader(val[0], val[1], batch_size, False,
                                              self.data_seed, self.ctx)
        return array(train_x[:1], ctx=self.ctx)

    def _arrays(self, spec: JobSpec) -> tuple[Any, Any, tuple[Any, Any] | None]:
        """The array data: (train x, train y, (val x, val y) or None), normalised as asked."""
        data_spec = spec.data
        train_x, train_y = build.source_arrays(data_spec.train, self._load_upload)
        val = build.source_arrays(data_spec.val, self._load_upload) if data_spec.val else None
        if data_spec.normalize == "auto":
            # The training set's per-feature mean/std, for both splits.
            mean, std = train_x.mean(axis=0), np.maximum(train_x.std(axis=0), 1e-6)
            train_x = (train_x - mean) / std
            val = ((val[0] - mean) / std, val[1]) if val is not None else None
        return train_x, train_y, val

    def _trainer_spec(self, spec: JobSpec) -> JobSpec:
        """The spec the trainer is built from (a distributed rank swaps in its kvstore)."""
        return spec

    def build(self) -> None:
        spec = self.spec
        self.ctx = build.pick_context(spec.device)
        log.info("job %s trains on %s", self.job_id, self.ctx)
        engine.random.seed(self.data_seed)
        sample = self._build_data(spec)
        self.net = networks.build_model(spec.model, self.store)
        initializer = build.create_component(engine.initializer.create, "initializer",
                                             spec.initializer)
        self.net.initialize(initializer, ctx=self.ctx)
        # Materialise deferred shapes now (an inference pass draws no random numbers), so
        # a checkpoint can be loaded into the parameters before training starts.
        self.net(sample)
        # An uploaded model's own params are the starting point (a checkpoint, if any,
        # replaces them in resume()).
        networks.load_initial_weights(self.net, spec.model, self.store, self.ctx)
        self.loss = build.create_component(engine.gluon.loss.create, "loss", spec.loss)
        self.trainer = build.build_trainer(self._trainer_spec(spec), self.net)
        # A Loss metric on each split gives train_loss / val_loss points.
        self.train_metrics = [*build.build_metrics(spec.metrics), engine.metric.Loss("loss")]
        self.val_metrics = [*build.build_metrics(spec.metrics), engine.metric.Loss("loss")]
        self.epochs = spec.epochs
        params = {p.name: p for p in self.trainer.parameters}
        self.steering = Steering(self.job_id, self.trainer, params, list(spec.rules),
                                 branch=self.branch)
        if self._on_built is not None:
            # What a freeze pattern can name, for the api (which cannot build the model).
            self._on_built([{"name": name, "shape": list(p.shape or ()),
                             "trainable": p.grad_req != "null"} for name, p in params.items()])

    def resume(self) -> CheckpointMeta | None:
        """Load the latest complete checkpoint, if any; returns its meta."""
        loaded = latest_complete_checkpoint(self.store, self.job_id)
        try:
            sweep_interrupted_writes(self.store, self.job_id,
                                     None if loaded is None else loaded.meta.step)
        except Exception:  # noqa: BLE001 - debris costs space, not correctness: train on
            log.warning("job %s: could not sweep checkpoint debris", self.job_id,
                        exc_info=True)
        if loaded is None:
            return None
        return self._restore(loaded)

    def _restore(self, loaded: LoadedCheckpoint) -> CheckpointMeta:
        """Load ``loaded`` into the network, trainer, RNG and position; returns its meta."""
        meta = loaded.meta
        self.net.load_parameters(io.BytesIO(loaded.params), ctx=self.ctx)
        # Frozen parameters and a replaced schedule first: the trainer state saved the
        # schedule's state, which loads only into a schedule of its kind.
        self.steering.restore(meta.steering)
        self.trainer.load_states(io.BytesIO(loaded.trainer))
        engine.random.set_state(meta.rng_state)
        self.state.step, self.state.epoch = meta.step, meta.epoch
        self.state.batch_index = meta.batch_index
        if meta.steering is None:  # written before commands were listed in checkpoints
            self._replay = [r for r in self._replay if r.applied_step > meta.step]
        else:
            done = set(self.steering.state.applied)
            self._replay = [r for r in self._replay if r.command.command_id not in done]
        log.info("job %s resumes from step %d (epoch %d, batch %d)", self.job_id, meta.step,
                 meta.epoch, meta.batch_index)
        return meta

    # ---------------------------------------------------------------- commands
    def current_lr(self) -> float:
        return float(self.trainer.learning_rate)

    def _replay_due(self, next_step: int) -> tuple[list[Command], int | None]:
        """The commands to re-apply before ``next_step`` (they took effect at or before
        it), and the step of the next one still to come (None: none left)."""
        due = []
        while self._replay and self._replay[0].applied_step <= next_step:
            due.append(self._replay.pop(0).command)
        return due, (self._replay[0].applied_step if self._replay else None)

    def evaluate_now(self) -> dict[str, float]:
        """A validation pass now (an ``evaluate`` command): ``{val_<metric>: value}``."""
        from workers.hooks import metric_values

        kinds = [(m, isinstance(m, engine.metric.Loss)) for m in self.val_metrics]
        evaluate(self.net, self.loss, self.val_data, kinds)
        return metric_values("val", self.val_metrics, finite=False)

    # ---------------------------------------------------------------- checkpoints
    def save_checkpoint(self, reason: str, wait: bool = False) -> bool:
        """Snapshot the state now; upload in the background unless ``wait``."""
        if not self.io.still_owner():
            return False
        started = time.perf_counter()
        params, trainer_state = io.BytesIO(), io.BytesIO()
        self.net.save_parameters(params)
        self.trainer.save_states(trainer_state)
        meta = CheckpointMeta(
            job_id=self.job_id, step=self.state.step, epoch=self.state.epoch,
            batch_index=self.state.batch_index, data_seed=self.data_seed,
            rng_state=engine.random.get_state(), learning_rate=self.current_lr(),
            created_at=time.time(), steering=self.steering.snapshot(),
        )
        blobs = (params.getvalue(), trainer_state.getvalue())

        def upload() -> bool:
            # The points up to this step are stored (in the DB, or the worker's spool file
            # while the DB is down) before the checkpoint is: a resume re-creates only
            # the points after it.
            self.io.flush()
            final = write_checkpoint(self.store, meta, blobs[0], blobs[1],
                                     still_owner=self.io.still_owner)
            if final is None:
                return False
            files = dict(final.files)
            meta_bytes = final.to_json()
            files[META_FILE] = {"sha256": sha256_hex(meta_bytes), "size": len(meta_bytes)}
            size = sum(int(f["size"]) for f in files.values())
            pruned = self._pruner.plan(final.step)
            # One DB transaction adds this checkpoint and drops the pruned ones; their
            # files go after it, so a listed checkpoint always has its files.
            try:
                saved = self.io.checkpoint_saved(final.step, final.epoch,
                                                 checkpoint_prefix(self.job_id, final.step),
                                                 files, size, final.sha256, pruned=pruned)
            except Exception:
                self._pruner.forget()  # the pruned rows are still there: plan them again
                raise
            if not saved:
                return False
            self._pruner.delete(pruned)
            log.info("job %s checkpoint at step %d (%s) in %.3fs", self.job_id, final.step,
                     reason, time.perf_counter() - started)
            return True

        if wait:
            return self._writer.submit(upload, wait=True)
        return self._writer.submit(self._logged(upload, meta.step), wait=False)

    def _logged(self, upload: Callable[[], bool], step: int) -> Callable[[], bool]:
        """An interval checkpoint that fails is reported, and training goes on."""

        def run() -> bool:
            try:
                return upload()
            except Exception as exc:  # noqa: BLE001 - the next interval retries
                if self.io.still_owner():
                    self.io.publish(LogEvent(level="warning",
                                             message=f"checkpoint at step {step} failed: "
                                                     f"{type(exc).__name__}: {exc}"))
                raise

        return run

    # ---------------------------------------------------------------- the loop
    def make_handler(self) -> ServiceHandler:
        return ServiceHandler(
            self.io, self.state, steering=self.steering, save_checkpoint=self.save_checkpoint,
            current_lr=self.current_lr, checkpoint_every=self.checkpoint_every,
            pacing=self.pacing, replay=self._replay_due,
            evaluate=self.evaluate_now if self.val_data is not None else None,
        )

    def run(self) -> RunResult:
        """Build, resume from the latest complete checkpoint, train to an outcome."""
        self.build()
        self.resume()
        return self.train()

    def train(self) -> RunResult:
        """The training loop, then what its outcome calls for (a checkpoint, mostly)."""
        self.fit()
        return self.finish()

    def fit(self) -> None:
        """Train from where the state stands until the last epoch ends or a hook stops."""
        if self.state.epoch >= self.epochs:
            return
        handler = self.make_handler()
        first_step, started = self.state.step, time.perf_counter()
        try:
            run_epochs(
                net=self.net, loss_fn=self.loss, trainer=self.trainer,
                train_data=self.train_data, val_data=self.val_data,
                train_metrics=self.train_metrics, val_metrics=self.val_metrics,
                epochs=self.epochs, begin_epoch=self.state.epoch,
                begin_batch=self.state.batch_index, handler=handler,
                step_size=self.step_size,
            )
        except BaseException:
            self._writer.drain()
            raise
        self.loop_seconds = time.perf_counter() - started
        steps = self.state.step - first_step
        log.info("job %s trained %d steps in %.3fs (%.0f steps/s)", self.job_id, steps,
                 self.loop_seconds, steps / max(self.loop_seconds, 1e-9))

    def finish(self) -> RunResult:
        """Checkpoint as the loop's outcome requires and report it."""
        reason = self.state.stop_reason
        if reason != STOP_LEASE_LOST and self.io.still_owner():
            # Progress is otherwise recorded with (throttled) metrics: make the job row
            # show the step it stopped at, the one its checkpoint and a resume start from.
            state = self.state
            self.io.record_progress(state.step, state.epoch, self.current_lr(),
                                    dict(state.last_metrics))
        if reason in (STOP_LEASE_LOST, STOP_CANCEL, STOP_ROLLBACK):
            self._writer.drain()  # nothing of this run writes after it returns
            self.io.flush()
            return self._result({STOP_LEASE_LOST: "lease_lost", STOP_CANCEL: "cancelled",
                                 STOP_ROLLBACK: "rolled_back"}[reason])
        self.io.flush()
        if reason in (STOP_PAUSE, STOP_SHUTDOWN):
            self.save_checkpoint(reason, wait=True)
            return self._result("paused" if reason == STOP_PAUSE else "interrupted")
        if self.save_checkpoint("final", wait=True) and self.io.still_owner():
            self._export()
        return self._result("succeeded")

    def _export(self) -> None:
        """The trained network in MXNet's format, for GET /v1/jobs/{id}/export. A failure
        is reported, not fatal: the job trained and its checkpoint is saved."""
        try:
            sizes = networks.export_network(self.net, self.store, self.job_id)
        except Exception as exc:  # noqa: BLE001 - any engine or storage refusal
            log.exception("job %s: export failed", self.job_id)
            self.io.publish(LogEvent(level="warning", message=f"export in MXNet format "
                                     f"failed: {type(exc).__name__}: {exc}"))
            return
        log.info("job %s exported (%s)", self.job_id, sizes)

    def _result(self, outcome: str) -> RunResult:
        command = self.state.stop_command
        return RunResult(outcome=outcome, step=self.state.step, epoch=self.state.epoch,
                         final_metrics=dict(self.state.last_metrics),
                         command_id=self.state.stop_command_id,
                         reason=getattr(command, "reason", None),
                         rollback=command if isinstance(command, RollbackCommand) else None)


def _validated(spec: Mapping[str, Any]) -> JobSpec:
    """A stored spec, validated again (the tables may have tightened since it was stored)."""
    try:
        return parse_spec(dict(spec))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "spec"
        raise build.SpecError(f"invalid spec: {where}: {first['msg']}") from exc


def _no_datasets(dataset_id: str) -> StoredDataset:
    raise build.SpecError(f"dataset {dataset_id!r}: uploads are not available here")


def _no_uploads(dataset_id: str) -> bytes:
    raise build.SpecError(f"dataset {dataset_id!r}: uploads are not available here")
