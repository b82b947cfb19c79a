"""The service's training loop vs the bare engine loop on the same job (target: within 3%).

    .venv/bin/python bench/service_loop.py [--spec examples/digits-mlp.yaml] [--repeats 5]

Three ways to train the same spec, seed and data, interleaved and repeated, medians:

- ``bare``: a hand-written engine loop: forward, loss, backward, ``trainer.step``, metric
  updates, validation each epoch — no hooks, no I/O;
- ``estimator``: ``engine.gluon.estimator.Estimator.fit`` with its default handlers;
- ``service``: :class:`workers.runner.JobRunner` with the production JobIO (a private
  redis-server, SQLite with the Alembic schema, a local object store): metric events,
  batched DB points, control-stream polling, lease checks and checkpoints per the spec.

All three build their objects the same way (workers.build) and time only training.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _spec(path: Path, epochs: int | None) -> dict[str, Any]:
    from core.jobspec import parse_spec

    spec = parse_spec(yaml.safe_load(path.read_text())).model_dump(mode="json")
    if epochs:
        spec["epochs"] = epochs
    spec["device"] = "cpu"
    return spec


class NullIO:
    """A JobIO that drops everything: the runner without a service around it."""

    def still_owner(self) -> bool:
        return True

    def publish(self, *_: Any) -> None: ...
    def record_metrics(self, *_: Any) -> None: ...
    def record_progress(self, *_: Any) -> None: ...
    def lr_applied(self, *_: Any) -> None: ...
    def lr_rejected(self, *_: Any) -> None: ...
    def checkpoint_saved(self, *_: Any) -> None: ...
    def checkpoints_pruned(self, *_: Any) -> None: ...

    def poll_commands(self) -> list[Any]:
        return []

    def flush(self) -> None: ...


Timing = tuple[float, float, float]


def _now() -> Timing:
    return time.perf_counter(), time.process_time(), time.thread_time()


def _since(started: Timing) -> Timing:
    """(wall s, CPU s of the whole process — background threads too —, CPU s of the
    training thread alone)."""
    now = _now()
    return now[0] - started[0], now[1] - started[1], now[2] - started[2]


def run_bare(spec: dict[str, Any]) -> Timing:
    from workers.engine_api import engine
    from workers.runner import JobRunner

    runner = JobRunner("bench-bare", spec, store=None, job_io=NullIO())  # type: ignore[arg-type]
    runner.build()
    autograd = engine.autograd
    started = _now()
    for epoch in range(runner.epochs):
        runner.train_data.set_epoch(epoch)
        for m in runner.train_metrics:
            m.reset()
        for data, label in runner.train_data:
            with autograd.record():
                pred = runner.net(data)
                loss = runner.loss(pred, label)
            loss.backward()
            runner.trainer.step(data.shape[0])
            for m in runner.train_metrics:
                m.update(0, [loss]) if isinstance(m, engine.metric.Loss) else m.update(
                    [label], [pred])
        for m in runner.val_metrics:
            m.reset()
        for data, label in runner.val_data:
            pred = runner.net(data)
            for m in runner.val_metrics:
                m.update(0, [runner.loss(pred, label)]) if isinstance(
                    m, engine.metric.Loss) else m.update([label], [pred])
        for m in runner.val_metrics:
            m.get()
    return _since(started)


def run_estimator(spec: dict[str, Any]) -> Timing:
    from workers.engine_api import engine
    from workers.runner import JobRunner

    runner = JobRunner("bench-est", spec, store=None, job_io=NullIO())  # type: ignore[arg-type]
    runner.build()
    estimator = engine.gluon.estimator.Estimator(
        runner.net, runner.loss, train_metrics=runner.train_metrics,
        val_metrics=runner.val_metrics, trainer=runner.trainer, context=runner.ctx)
    started = _now()
    estimator.fit(runner.train_data, val_data=runner.val_data, epochs=runner.epochs)
    return _since(started)


def run_service(spec: dict[str, Any], index: int) -> Timing:
    from core import repositories as repo
    from core.db import session_scope
    from workers.lease import Lease
    from workers.resources import get_channel, get_store
    from workers.runner import JobRunner
    from workers.service_io import ControlListener, ServiceIO

    with session_scope() as session:
        user = repo.get_user_by_name(session, name="bench") or repo.create_user(
            session, name="bench")
        job = repo.create_job(session, owner_id=user.id, name=f"bench-{index}", spec=spec,
                              queue="cpu")
        job_id = job.id
    channel = get_channel()
    lease = Lease(channel, job_id, ttl_seconds=30)
    assert lease.acquire()
    listener = ControlListener(channel, job_id, after=channel.last_command_id(job_id))
    listener.start()
    job_io = ServiceIO(channel, job_id, still_owner=lambda: lease.held, listener=listener)
    from workers.settings import get_worker_settings

    settings = get_worker_settings()
    runner = JobRunner(job_id, spec, get_store(), job_io, log_every=settings.log_every_steps,
                       min_publish_interval=settings.metrics_min_interval_seconds)
    runner.build()
    runner.resume()
    started = _now()
    result = runner.train()
    job_io.flush()
    elapsed = _since(started)
    job_io.close()
    listener.stop()
    lease.release()
    assert result.outcome == "succeeded", result
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=ROOT / "examples" / "digits-mlp.yaml")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--checkpoint-every", type=int, default=None,
                        help="override the spec's checkpoint interval (steps)")
    args = parser.parse_args()

    from tests.services import redis_server

    with tempfile.TemporaryDirectory() as home, redis_server() as redis_url:
        db_url = f"sqlite:///{home}/bench.db"
        os.environ.update({
            "RUDDER_DATABASE_URL": db_url, "RUDDER_REDIS_URL": redis_url,
            "RUDDER_STORAGE_URL": f"file://{home}/objects", "RUDDER_ENVIRONMENT": "development",
        })
        from core.migrate import upgrade

        upgrade(db_url)
        print("columns: wall = elapsed; cpu = process CPU incl. background I/O threads; "
              "loop = CPU of the training thread alone")
        spec = _spec(args.spec, args.epochs)
        if args.checkpoint_every:
            spec["checkpoint"]["every_steps"] = args.checkpoint_every
        runs: dict[str, list[Timing]] = {"bare": [], "estimator": [], "service": []}
        run_bare(spec)  # warm-up: imports, allocator, sklearn data cache
        for index in range(args.repeats):
            runs["bare"].append(run_bare(spec))
            runs["estimator"].append(run_estimator(spec))
            runs["service"].append(run_service(spec, index))
    print(f"spec {args.spec.name}: epochs={spec['epochs']} batch={spec['data']['batch_size']} "
          f"checkpoint every {spec['checkpoint']['every_steps']} steps; "
          f"{args.repeats} interleaved repeats")
    for column, label in ((0, "wall"), (1, "cpu"), (2, "loop")):
        times = {k: [r[column] for r in v] for k, v in runs.items()}
        medians = {k: statistics.median(v) for k, v in times.items()}
        # On a shared machine the minimum is the least noisy estimate of a loop's own cost.
        minima = {k: min(v) for k, v in times.items()}
        for name in times:
            print(f"  {label:4s} {name:10s} median {medians[name]:7.3f}s  "
                  f"min {minima[name]:7.3f}s  max {max(times[name]):7.3f}s")
        for stat_name, stat in (("median", medians), ("min", minima)):
            ratio = stat["service"] / stat["bare"] - 1
            print(f"  {label} {stat_name}: service vs bare {ratio:+.1%}"
                  f" (target within +3%), vs estimator "
                  f"{stat['service'] / stat['estimator'] - 1:+.1%}")


if __name__ == "__main__":
    main()
