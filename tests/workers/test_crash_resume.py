"""A worker process killed (SIGKILL) in the middle of a checkpoint write: the next run
resumes from the previous complete checkpoint, sweeps the dead write's debris and ends
bit-identical to an uninterrupted run, LR changes included.

The killed worker is a real process running ``run_job`` against the real services; its
object store is a local directory store that, to make the kill land inside a write every
time, writes half of one checkpoint file into a real temporary file and then stalls (and
can hold another checkpoint's upload until the test releases it).
"""

from __future__ import annotations

import io
import multiprocessing
import os
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core import repositories as repo
from core.channel import Channel
from core.commands import (
    EvaluateCommand,
    FreezeCommand,
    SetHyperparametersCommand,
    SetRulesCommand,
    SetScheduleCommand,
    UnfreezeCommand,
)
from core.db import session_scope
from core.events import Command, SetLRCommand
from core.jobspec import SchedulerSpec, parse_spec
from core.models import LRChangeMode
from core.storage import LocalStore, ObjectStore, store_from_settings
from tests.services import wait_until
from tests.workers.jobs import ScriptedIO
from tests.workers.test_runner import SPEC
from workers.checkpoints import checkpoint_prefix, latest_complete_checkpoint
from workers.runner import JobRunner

CRASH_SPEC: dict[str, Any] = {**SPEC, "name": "crash-resume", "epochs": 8,
                              "checkpoint": {"every_steps": 10, "keep_last": 2}}


class StallingStore(LocalStore):
    """A local store whose checkpoint writes can be held (``hold_step``: wait for a
    ``release`` file before the first file) or killed half-way (``stall_step`` and later:
    half of params.npz goes into a temporary file, then the write never finishes)."""

    def __init__(self, root: str, signals: str, hold_step: int | None, stall_step: int):
        super().__init__(root)
        self.signals = Path(signals)
        self.hold_step = hold_step
        self.stall_step = stall_step

    def put(self, key: str, data: bytes) -> None:
        step = _checkpoint_step(key)
        if step is not None and key.endswith("/params.npz"):
            if step == self.hold_step:
                (self.signals / f"holding-{step}").touch()
                while not (self.signals / "release").exists():
                    time.sleep(0.01)
            elif step >= self.stall_step:
                folder = self._path(key).parent
                folder.mkdir(parents=True, exist_ok=True)
                with open(folder / ".tmp-killed.part", "wb") as handle:
                    handle.write(data[: len(data) // 2])
                    handle.flush()
                    os.fsync(handle.fileno())
                (self.signals / f"writing-{step}").touch()
                time.sleep(3600)  # killed here
        super().put(key, data)


def _checkpoint_step(key: str) -> int | None:
    parts = key.split("/")
    if len(parts) == 5 and parts[2] == "checkpoints" and parts[3].isdigit():
        return int(parts[3])
    return None


def _run_worker(job_id: str, root: str, signals: str, hold_step: int | None,
                stall_step: int) -> None:
    """The worker process: the real lifecycle over a stalling store."""
    import workers.lifecycle

    store = StallingStore(root, signals, hold_step, stall_step)
    workers.lifecycle.get_store = lambda: store  # type: ignore[assignment]
    workers.lifecycle.run_job(job_id)


def _submit(spec: dict[str, Any]) -> tuple[str, str]:
    with session_scope() as session:
        user = repo.get_user_by_name(session, name="crash") or repo.create_user(
            session, name="crash")
        job = repo.create_job(session, owner_id=user.id, name=spec["name"],
                              spec=parse_spec(spec).model_dump(mode="json"), queue="cpu")
        return job.id, user.id


def _final_files(store: ObjectStore, job_id: str) -> tuple[bytes, bytes]:
    loaded = latest_complete_checkpoint(store, job_id)
    assert loaded is not None
    return loaded.params, loaded.trainer


def _arrays(npz: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(npz), allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def _lr_changes(job_id: str) -> list[Any]:
    with session_scope() as session:
        return list(repo.list_lr_changes(session, job_id=job_id))


def _job(job_id: str) -> Any:
    with session_scope() as session:
        return repo.get_job(session, job_id=job_id)


def _kill_during_write(job_id: str, signals: Path, *, hold_step: int | None,
                       stall_step: int, while_held: Any = None, before_kill: Any = None) -> None:
    store = store_from_settings()
    assert isinstance(store, LocalStore)
    signals.mkdir()
    child = multiprocessing.get_context("spawn").Process(
        target=_run_worker, args=(job_id, str(store.root), str(signals), hold_step, stall_step))
    child.start()
    try:
        if hold_step is not None:
            wait_until((signals / f"holding-{hold_step}").exists, 60, what="held upload")
            while_held()
            (signals / "release").touch()
        wait_until((signals / f"writing-{stall_step}").exists, 60, what="stalled write")
        if before_kill is not None:
            before_kill()
    finally:
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join()


def _resume(job_id: str, channel: Channel) -> None:
    from workers.lifecycle import run_job
    from workers.watchdog import sweep

    assert _job(job_id).status == "running"  # the dead worker never said otherwise
    requeued = wait_until(lambda: sweep(channel), 10,
                          what="lease expiry and re-queue")
    assert requeued == [job_id]
    assert run_job(job_id).result == "succeeded"


def _assert_no_debris(store: LocalStore, job_id: str) -> None:
    folder = store.root / checkpoint_prefix(job_id, 0).rsplit("/", 2)[0]
    leftovers = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                       if p.name.startswith(".tmp-") or (p.is_dir() and not any(p.iterdir())))
    assert leftovers == []
    for step_folder in folder.iterdir():  # keep_last complete checkpoints, nothing else
        assert (step_folder / "meta.json").is_file(), step_folder.name


@pytest.fixture(params=["postgresql", "sqlite"])
def database(request: pytest.FixtureRequest, worker_env: dict[str, str], tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> str:
    """The worker's database: the private PostgreSQL one, or a migrated SQLite file."""
    if request.param == "sqlite":
        from core.migrate import upgrade
        from tests.workers.conftest import _clear_caches

        url = f"sqlite:///{tmp_path / 'rudder.db'}"
        upgrade(url)
        monkeypatch.setenv("RUDDER_DATABASE_URL", url)
        _clear_caches()
    return str(request.param)


def test_worker_killed_writing_a_later_checkpoint_resumes_from_the_previous_one(
        database: str, channel: Channel, tmp_path: Path) -> None:
    from workers.lifecycle import run_job

    store = store_from_settings()
    assert isinstance(store, LocalStore)
    crashed, _ = _submit(CRASH_SPEC)
    _kill_during_write(crashed, tmp_path / "signals", hold_step=None, stall_step=30)
    # The kill left a half-written file of the step-30 checkpoint; step 20 is complete.
    assert (store.root / checkpoint_prefix(crashed, 30) / ".tmp-killed.part").is_file()
    previous = latest_complete_checkpoint(store, crashed)
    assert previous is not None and previous.meta.step == 20

    _resume(crashed, channel)
    _assert_no_debris(store, crashed)

    reference, _ = _submit(CRASH_SPEC)  # uninterrupted, in this process (which has built
    assert run_job(reference).result == "succeeded"  # other nets: names must not matter)
    assert _job(crashed).step == _job(reference).step
    # Weights and optimizer state, byte for byte: the checkpoint files are identical.
    assert _final_files(store, crashed) == _final_files(store, reference)


def _uninterrupted_with_change(store: ObjectStore, command: SetLRCommand,
                               at_step: int) -> tuple[bytes, bytes]:
    scripted = ScriptedIO({at_step: [command]})
    job_id = f"reference-{at_step}"
    runner = JobRunner(job_id, CRASH_SPEC, store, scripted)
    scripted.runner = runner
    assert runner.run().outcome == "succeeded"
    return _final_files(store, job_id)


def test_lr_change_applied_before_the_kill_is_replayed_at_its_step(
        database: str, channel: Channel, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.workers.conftest import _clear_caches

    # Every 10th step's metrics are published, so the test sees where the loop stands.
    monkeypatch.setenv("RUDDER_WORKER_METRICS_MIN_INTERVAL_SECONDS", "0")
    _clear_caches()
    store = store_from_settings()
    assert isinstance(store, LocalStore)
    crashed, user_id = _submit(CRASH_SPEC)

    def change_lr() -> None:
        # The step-20 upload is held, so the loop waits at step 30's checkpoint for it:
        # the change, sent now, takes effect after step 30, past the checkpoints at 20, 30.
        wait_until(lambda: any(e.type == "metric" and e.data["step"] == 30
                               for e in channel.read_events(crashed, count=10_000)), 30,
                   what="the loop at step 30")
        with session_scope() as session:
            change = repo.create_lr_change(session, job_id=crashed, requested_lr=0.0005,
                                           mode=LRChangeMode.SCALE, requested_by=user_id)
        channel.send_command(crashed, SetLRCommand(command_id=change.id, learning_rate=0.0005,
                                                   mode="scale", requested_by=user_id))

    def change_confirmed() -> None:  # recorded by the worker before it dies
        wait_until(lambda: _lr_changes(crashed)[0].status == "applied", 30,
                   what="the change confirmed")

    _kill_during_write(crashed, tmp_path / "signals", hold_step=20, stall_step=40,
                       while_held=change_lr, before_kill=change_confirmed)
    change = _lr_changes(crashed)[0]
    assert change.status == "applied" and change.applied_step is not None
    applied_step = int(change.applied_step)
    previous = latest_complete_checkpoint(store, crashed)
    assert previous is not None and previous.meta.step == 30 < applied_step

    _resume(crashed, channel)
    _assert_no_debris(store, crashed)
    after = _lr_changes(crashed)
    assert [(c.status, c.applied_step) for c in after] == [("applied", applied_step)]

    command = SetLRCommand(command_id="reference", learning_rate=0.0005, mode="scale")
    uninterrupted = _uninterrupted_with_change(store, command, applied_step)
    assert _final_files(store, crashed) == uninterrupted  # byte for byte
    # ... and the change mattered: without it the run ends elsewhere.
    without = _uninterrupted_with_change(store, command, at_step=10**9)
    crashed_params, without_params = _arrays(uninterrupted[0]), _arrays(without[0])
    assert any(not np.array_equal(crashed_params[k], without_params[k]) for k in crashed_params)


def _steering_commands(user_id: str) -> list[Command]:
    return [
        SetHyperparametersCommand(wd=0.02, beta1=0.85, requested_by=user_id),
        FreezeCommand(pattern="net_dense0_", requested_by=user_id),
        SetScheduleCommand(lr_scheduler=SchedulerSpec(type="factor", step=5, factor=0.8),
                           learning_rate=0.003, requested_by=user_id),
        EvaluateCommand(requested_by=user_id),
        UnfreezeCommand(pattern="net_dense0_weight", requested_by=user_id),
        # no validation is ever "better" by 1000: it fires at the second one after this
        SetRulesCommand(rules=[{"type": "reduce_on_plateau", "name": "plateau",
                                "patience": 1, "factor": 0.5, "min_delta": 1000.0}],
                        requested_by=user_id),
    ]


def _commands(job_id: str) -> list[Any]:
    with session_scope() as session:
        return list(repo.list_commands(session, job_id=job_id))


def test_commands_applied_before_the_kill_are_replayed_at_their_steps(
        database: str, channel: Channel, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Hyperparameters, a freeze, a replaced schedule, an evaluation, an unfreeze of part
    of what was frozen and new rules confirmed after the last complete checkpoint: the
    resumed run applies each again at its step (from the database's record), its rule
    fires where an uninterrupted run's does, and it ends byte-identical to that run."""
    from tests.workers.conftest import _clear_caches

    monkeypatch.setenv("RUDDER_WORKER_METRICS_MIN_INTERVAL_SECONDS", "0")
    _clear_caches()
    store = store_from_settings()
    assert isinstance(store, LocalStore)
    crashed, user_id = _submit(CRASH_SPEC)
    sent = _steering_commands(user_id)

    def steer() -> None:  # as with the lr change above: they apply after step 30
        wait_until(lambda: any(e.type == "metric" and e.data["step"] == 30
                               for e in channel.read_events(crashed, count=10_000)), 30,
                   what="the loop at step 30")
        with session_scope() as session:
            for command in sent:
                repo.create_command(session, job_id=crashed, command=command)
        for command in sent:
            channel.send_command(crashed, command)

    def confirmed() -> None:
        wait_until(lambda: [c.status for c in _commands(crashed)] == ["applied"] * len(sent),
                   30, what="the commands confirmed")

    _kill_during_write(crashed, tmp_path / "signals", hold_step=20, stall_step=40,
                       while_held=steer, before_kill=confirmed)
    steps = {c.id: int(c.applied_step) for c in _commands(crashed)}
    previous = latest_complete_checkpoint(store, crashed)
    assert previous is not None and previous.meta.step == 30 < min(steps.values())

    _resume(crashed, channel)
    after = {c.id: (c.status, c.applied_step) for c in _commands(crashed)
             if c.source == "user"}
    assert after == {k: ("applied", v) for k, v in steps.items()}  # recorded once
    fired = [(c.kind, c.status, c.applied_step) for c in _commands(crashed)
             if c.source == "rule"]

    script: dict[int, list[Command]] = {}
    for command in _steering_commands(user_id):
        original = next(s for s in sent if s.type == command.type)
        script.setdefault(steps[original.command_id], []).append(command)
    scripted = ScriptedIO(script)
    runner = JobRunner("reference-steered", CRASH_SPEC, store, scripted)  # type: ignore[arg-type]
    scripted.runner = runner
    assert runner.run().outcome == "succeeded"
    assert fired and fired == [(o.command.type, o.status, o.step) for o in scripted.outcomes
                               if o.command.source == "rule"]
    assert _final_files(store, crashed) == _final_files(store, "reference-steered")
