"""One rank of a distributed job: the job runner on its shard, with the gang's handler.

Every rank builds the same network from the same seed and trains it with
``kvstore='dist_sync'`` (the engine sums the gradients over the ranks through Gloo), on
its part of each global batch (:mod:`workers.shards`: arrays or images, the plan a
function of (seed, epoch, N) only). Each update normalises by the global batch's size, so
the sums equal one worker's mean gradient (up to the order floats are added in). Any
partial batch is left out with ``trainer.update_on_kvstore: true``, which fixes the batch
size.

Rank 0 owns the job's I/O: it chooses the checkpoint to resume from and tells the
others (with the commands to replay), and it alone writes checkpoints, metrics and
confirmations. Every rank holds the same weights, trainer state and RNG stream (the same
seed, the same draws), so rank 0's checkpoint is every rank's.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import TypeAdapter

from core.commands import Command
from core.jobspec import JobSpec
from engine.ndarray.creation import array
from workers import build, data_sources
from workers.checkpoints import (
    CheckpointMeta,
    latest_complete_checkpoint,
    load_checkpoint,
    sweep_interrupted_writes,
)
from workers.gang.handler import GangHandler
from workers.gang.link import Link
from workers.hooks import ServiceHandler
from workers.runner import JobRunner, ReplayedCommand
from workers.shards import ImageShardLoader, ShardLoader

log = logging.getLogger(__name__)
_COMMAND: TypeAdapter[Command] = TypeAdapter(Command)


class GangRunner(JobRunner):
    """:class:`~workers.runner.JobRunner` for one rank of ``world`` (engine.distributed)."""

    def __init__(self, *args: Any, world: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.world = world
        self.rank, self.size = int(world.rank), int(world.size)
        self.handler: GangHandler | None = None

    def _build_data(self, spec: JobSpec) -> Any:
        shard: dict[str, Any] = {
            "global_batch": spec.data.batch_size, "rank": self.rank, "size": self.size,
            "shuffle": spec.data.shuffle, "seed": self.data_seed, "ctx": self.ctx,
            "keep_partial": spec.trainer.update_on_kvstore is not True}
        if data_sources.is_image_source(spec.data.train, self._lookup_dataset):
            cache = data_sources.DatasetCache(self._data_cache, self.store)
            splits = data_sources.image_splits(spec.data, cache, self._lookup_dataset,
                                               seed=self.data_seed)
            images = ImageShardLoader(splits.train_set, splits.train_transforms, **shard,
                                      random_transforms=splits.random_transforms)
            self.train_data, self.step_size = images, images.step_size
            # rank 0 validates, on the whole split
            self.val_data = splits.val if self.rank == 0 else None
            return splits.sample.as_in_context(self.ctx)
        train_x, train_y, val = self._arrays(spec)
        loader = ShardLoader(train_x, train_y, **shard)
        self.train_data, self.step_size = loader, loader.step_size
        self.val_data = None  # rank 0 validates, on the whole split
        if val is not None and self.rank == 0:
            self.val_data = build.make_loader(val[0], val[1], spec.data.batch_size, False,
                                              self.data_seed, self.ctx)
        return array(train_x[:1], ctx=self.ctx)

    def _trainer_spec(self, spec: JobSpec) -> JobSpec:
        # Updating on the (dist) kvstore fixes the batch size at the first step (MXNet);
        # updating on every rank lets the last, partial batch normalise by its own size.
        on_kvstore = spec.trainer.update_on_kvstore is True
        trainer = spec.trainer.model_copy(update={"kvstore": "dist_sync",
                                                  "update_on_kvstore": on_kvstore})
        return spec.model_copy(update={"trainer": trainer})

    def build(self) -> None:
        super().build()
        self.link = Link(self.world, num_metrics=len(self.train_metrics))

    def resume(self) -> CheckpointMeta | None:
        """Rank 0 picks the checkpoint (and the commands to replay); every rank loads it."""
        loaded = None
        if self.rank == 0:
            loaded = latest_complete_checkpoint(self.store, self.job_id)
            try:
                sweep_interrupted_writes(self.store, self.job_id,
                                         None if loaded is None else loaded.meta.step)
            except Exception:  # noqa: BLE001 - debris costs space, not correctness
                log.warning("job %s: could not sweep checkpoint debris", self.job_id,
                            exc_info=True)
            start = {"step": None if loaded is None else loaded.meta.step,
                     "replay": [{"step": r.applied_step,
                                 "command": r.command.model_dump(mode="json")}
                                for r in self._replay]}
            self.link.share_json(start)
        else:
            start = self.link.share_json(None)
            self._replay = [ReplayedCommand(applied_step=int(r["step"]),
                                            command=_command(r["command"]))
                            for r in start["replay"]]
            if start["step"] is not None:
                loaded = load_checkpoint(self.store, self.job_id, int(start["step"]))
                if loaded is None:
                    raise RuntimeError(f"rank {self.rank}: cannot read the checkpoint at step "
                                       f"{start['step']} that rank 0 resumes from")
        return None if loaded is None else self._restore(loaded)

    def make_handler(self) -> ServiceHandler:
        self.handler = GangHandler(
            self.io, self.state, link=self.link, train_metrics=self.train_metrics,
            samples_per_step=self.spec.data.batch_size // self.size,
            steering=self.steering, save_checkpoint=self.save_checkpoint,
            current_lr=self.current_lr, checkpoint_every=self.checkpoint_every,
            pacing=self.pacing, replay=self._replay_due,
            evaluate=self.evaluate_now if self.val_data is not None else None,
        )
        return self.handler

    def fit(self) -> None:
        super().fit()
        if self.handler is not None:  # every rank that trained closes; none that did not
            self.handler.close(list(self.trainer.parameters))

    def save_checkpoint(self, reason: str, wait: bool = False) -> bool:
        if self.rank != 0:
            return True  # rank 0's checkpoint holds this rank's state too
        return super().save_checkpoint(reason, wait=wait)

    def _export(self) -> None:
        if self.rank == 0:
            super()._export()


def _command(body: dict[str, Any]) -> Command:
    return _COMMAND.validate_python(body)
