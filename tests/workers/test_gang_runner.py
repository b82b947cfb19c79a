"""Ranks of a distributed job as real processes over Gloo on loopback (no Celery, no
service): three ranks train what one worker trains on the same global batch, a run
stopped mid-way resumes from rank 0's checkpoint bit-identically (Dropout included), and a
killed or stopped rank ends the other's run. (Through the whole service, 2 ranks against
one worker with a live learning-rate change: tests/e2e/test_distributed.py; image data:
tests/workers/test_gang_images.py.)"""

from __future__ import annotations

import copy
import io
import multiprocessing
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.commands import SetLRCommand
from core.storage import LocalStore
from tests.services import free_port, wait_until
from tests.workers.jobs import ScriptedIO
from workers.checkpoints import latest_complete_checkpoint

SPEC: dict[str, Any] = {
    "name": "gang",
    "model": [{"type": "Dense", "units": 16, "activation": "relu"},
              {"type": "Dense", "units": 10}],
    "data": {"train": {"builtin": "digits", "split": "train"}, "batch_size": 64,
             "shuffle": True},
    "loss": {"type": "softmax_cross_entropy"},
    "initializer": {"type": "xavier"},
    "optimizer": {"type": "adam", "learning_rate": 0.01},
    "epochs": 2,  # 1257 samples: 19 full batches and one of 41 an epoch
    "metrics": ["accuracy"],
    "checkpoint": {"every_steps": 7, "keep_last": 10},
    "seed": 5,
    "device": "cpu",
}
LR_AT = 12  # decided at the boundary after step 11: steps 12.. run with the new rate


def _spec(workers: int, dropout: bool = False, batch_size: int = 64) -> dict[str, Any]:
    spec = copy.deepcopy(SPEC)
    spec["resources"] = {"workers": workers}
    spec["data"]["batch_size"] = batch_size
    if dropout:  # draws random numbers: the ranks' RNG state must resume too
        spec["model"].insert(1, {"type": "Dropout", "rate": 0.3})
    return spec


def _script() -> dict[int, list[Any]]:
    return {LR_AT: [SetLRCommand(command_id="lr-1", learning_rate=0.002)]}


def _rank(rank: int, size: int, port: int, job_id: str, root: str, out: str,
          crash_at: int | None, dropout: bool, batch_size: int = 64) -> None:
    """One rank's process: join, train, write what it ended with."""
    import json

    import engine.distributed
    from workers.gang.handler import NullIO
    from workers.gang.runner import GangRunner

    world = engine.distributed.init(engine.distributed.Rendezvous(
        rank, size, "127.0.0.1", port, timeout=30))
    scripted = ScriptedIO(_script(), crash_at=crash_at)
    job_io: Any = scripted if rank == 0 else NullIO()
    runner = GangRunner(job_id, _spec(size, dropout, batch_size), LocalStore(root), job_io,
                        world=world)
    scripted.runner = runner
    result = runner.run()
    params = {p.name: p.data().asnumpy() for p in runner.trainer.parameters}
    np.savez(f"{out}/rank{rank}.npz", **params)
    outcomes = [o.model_dump(mode="json") for o in scripted.outcomes]
    Path(f"{out}/rank{rank}.json").write_text(json.dumps(
        {"outcome": result.outcome, "step": result.step, "outcomes": outcomes,
         "digests": runner.handler.digests if runner.handler else []}))
    engine.distributed.shutdown()


def _run_gang(size: int, job_id: str, root: Path, out: Path,
              crash_at: int | None = None, dropout: bool = False,
              batch_size: int = 64) -> list[dict[str, Any]]:
    import json

    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_rank, args=(r, size, port, job_id, str(root),
                                                     str(out), crash_at, dropout,
                                                     batch_size))
                 for r in range(size)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=240)
        assert process.exitcode == 0, f"a rank exited with {process.exitcode}"
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(size)]


def _params(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


@pytest.mark.timeout(300)
def test_three_ranks_train_what_one_worker_trains_and_change_lr_at_one_step(
        tmp_path: Path) -> None:
    from workers.runner import JobRunner

    # 63 = 21 a rank; 1257 samples: 19 full batches and one of 60 an epoch
    reports = _run_gang(3, "gang-3", tmp_path / "store", tmp_path / "out", batch_size=63)
    assert [r["outcome"] for r in reports] == ["succeeded"] * 3
    assert {r["step"] for r in reports} == {2 * 20}
    assert len(set(reports[0]["digests"])) == 1  # the closing exchange compared all three
    (lr,) = [o for o in reports[0]["outcomes"] if o["command"]["command_id"] == "lr-1"]
    assert lr["status"] == "applied" and lr["result"]["rank_steps"] == [LR_AT] * 3
    scripted = ScriptedIO(_script())
    single = JobRunner("single", _spec(1, batch_size=63), LocalStore(tmp_path / "single"),
                       scripted)  # type: ignore[arg-type]
    scripted.runner = single
    assert single.run().outcome == "succeeded" and single.state.step == 2 * 20
    gang = _params(tmp_path / "out" / "rank0.npz")
    one = {p.name: p.data().asnumpy() for p in single.trainer.parameters}
    assert gang.keys() == one.keys()
    for name in gang:
        np.testing.assert_allclose(gang[name], one[name], rtol=1e-4, atol=1e-5,
                                   err_msg=name)


@pytest.mark.timeout(300)
def test_a_stopped_gang_resumes_from_rank_0s_checkpoint_bit_identically(
        tmp_path: Path) -> None:
    store = tmp_path / "store"
    # with Dropout: epoch 0's last batch (41 samples) splits 21/20, so the ranks' random
    # streams part there; the checkpoint must hold every rank's
    whole = _run_gang(2, "whole", store, tmp_path / "whole", dropout=True)
    assert whole[0]["outcome"] == "succeeded"
    # stopped at step 25 without a checkpoint there (a cancel writes none): the latest
    # complete one is step 21's
    first = _run_gang(2, "stopped", store, tmp_path / "first", crash_at=25, dropout=True)
    assert [r["outcome"] for r in first] == ["cancelled", "cancelled"]
    latest = latest_complete_checkpoint(LocalStore(store), "stopped")
    assert latest is not None and latest.meta.step == 21
    second = _run_gang(2, "stopped", store, tmp_path / "second", dropout=True)
    assert second[0]["outcome"] == "succeeded" and second[0]["step"] == 40
    assert len(set(second[0]["digests"])) == 1 and len(set(whole[0]["digests"])) == 1
    resumed, reference = (_params(tmp_path / "second" / "rank0.npz"),
                          _params(tmp_path / "whole" / "rank0.npz"))
    for name in reference:
        assert np.array_equal(resumed[name], reference[name]), name
    final = latest_complete_checkpoint(LocalStore(store), "stopped")
    assert final is not None
    with np.load(io.BytesIO(final.params), allow_pickle=False) as archive:
        assert len(archive.files) == len(reference)


def _rank_until_failure(rank: int, port: int, root: str, out: str, timeout: float) -> None:
    """A rank of a long job: records when and how its collective failed."""
    import json
    import time

    import engine.distributed
    from workers.gang.handler import NullIO
    from workers.gang.runner import GangRunner

    world = engine.distributed.init(engine.distributed.Rendezvous(
        rank, 2, "127.0.0.1", port, timeout=timeout))
    spec = _spec(2)
    spec["epochs"] = 10_000
    runner = GangRunner("long", spec, LocalStore(root), NullIO(), world=world)
    Path(f"{out}/ready{rank}").touch()
    try:
        runner.run()
        failure = {"error": None}
    except engine.distributed.DistributedError as exc:
        failure = {"error": str(exc), "at": time.time()}
    Path(f"{out}/failure{rank}.json").write_text(json.dumps(failure))
    engine.distributed.shutdown()


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("signal_name", "within"), [("SIGKILL", 5.0), ("SIGSTOP", 10.0 + 5.0)])
def test_the_other_rank_stops_when_one_is_killed_or_stopped(
        tmp_path: Path, signal_name: str, within: float) -> None:
    import json
    import os
    import signal
    import time

    port = free_port()
    context = multiprocessing.get_context("spawn")
    ranks = [context.Process(target=_rank_until_failure,
                             args=(r, port, str(tmp_path / "store"), str(tmp_path), 10.0))
             for r in range(2)]
    for process in ranks:
        process.start()
    wait_until(lambda: all((tmp_path / f"ready{r}").exists() for r in range(2)), 60,
               what="both ranks met")
    time.sleep(3)  # training under way
    assert all(p.is_alive() for p in ranks)
    sent = time.time()
    os.kill(ranks[1].pid or 0, getattr(signal, signal_name))
    ranks[0].join(timeout=30)
    os.kill(ranks[1].pid or 0, signal.SIGKILL)
    ranks[1].join(timeout=10)
    assert ranks[0].exitcode == 0
    failure = json.loads((tmp_path / "failure0.json").read_text())
    assert failure["error"] is not None, "rank 0 trained on without its peer"
    assert failure["at"] - sent < within, failure
    expected = "closed its connection" if signal_name == "SIGKILL" else "timed out after 10 s"
    assert expected in failure["error"]
