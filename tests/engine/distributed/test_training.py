"""N ranks on loopback train as one rank on the whole batch does (real processes).

Each case is one job: `python -m engine.launch` (Rudder's launcher) or MXNet's launcher
environment with its scheduler and server processes (which exit at once). A case takes
~10 s on a quiet 2-core machine (torch's import is most of it).
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.engine.distributed import launching

pytestmark = pytest.mark.slow

SCRIPT = launching.SCRIPTS / "train_shards.py"


def reference(out: Path, args: list[str]) -> dict[str, np.ndarray]:
    """The same script on one process without a kvstore (here, in this interpreter)."""
    argv = sys.argv
    sys.argv = [str(SCRIPT), str(out), "--kvstore", "none", *args]
    try:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    finally:
        sys.argv = argv
    return launching.load(out / "rank0.npz")


def assert_same_weights(ranks: list[dict[str, np.ndarray]], ref: dict[str, np.ndarray]) -> None:
    names = [k for k in ref if k != "facts"]
    for r, saved in enumerate(ranks):
        for name in names:
            # float32 sums in another order: a few ulps apart, nothing more
            np.testing.assert_allclose(saved[name], ref[name], rtol=1e-5, atol=1e-6,
                                       err_msg=f"{name} on rank {r}")
            np.testing.assert_array_equal(saved[name], ranks[0][name])  # replicas identical


def test_two_ranks_with_rudders_launcher_match_one_rank(tmp_path: Path) -> None:
    """Two trainings in one job: one backward per step (its buckets start during backward),
    then two backward passes per step with grad_req='add' (nothing may travel before
    step(): the second pass adds to the first)."""
    args = ["--net", "mlp", "--optimizer", "sgd", "--update-on-kvstore", "1", "--batch", "8",
            "--accumulate", "1,2"]
    done = launching.engine_launch(2, SCRIPT, str(tmp_path / "two"), *args, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    ref = reference(tmp_path / "one", args)
    ranks = [launching.load(tmp_path / "two" / f"rank{r}.npz") for r in range(2)]
    assert_same_weights(ranks, ref)
    assert [launching.facts(s)["rank"] for s in ranks] == [0, 1]
    assert launching.facts(ranks[0])["started_in_backward"] > 0
    accumulated = [launching.load(tmp_path / "two" / f"rank{r}.acc2.npz") for r in range(2)]
    assert_same_weights(accumulated, launching.load(tmp_path / "one" / "rank0.acc2.npz"))
    assert launching.facts(accumulated[0])["started_in_backward"] == 0
    # optimizer states (the kvstore's: update_on_kvstore) are equal on every rank and
    # survive a save / load / save round trip
    files = [tmp_path / "two" / name for name in ("rank0.states", "rank1.states",
                                                   "rank0.states.again")]
    states = [launching.load(f) for f in files]
    assert len(states[0]) > 4  # SGD with momentum: one state array per parameter
    for other in states[1:]:
        assert other.keys() == states[0].keys()
        for name, array in states[0].items():
            np.testing.assert_array_equal(other[name], array)


def test_three_ranks_of_a_hybridized_cnn_under_mxnets_launcher_match_one_rank(
        tmp_path: Path) -> None:
    """Small buckets (RUDDER_DIST_BUCKET_MB): every bucket's reduction starts during
    backward, from inside the hybridized program, after the first step. No DMLC_TASK_ID
    (as some launchers): the workers number themselves when they meet."""
    args = ["--net", "cnn", "--hybridize", "--optimizer", "adam", "--update-on-kvstore", "0"]
    ranks = launching.run(sys.executable, SCRIPT, tmp_path / "three", 3, timeout=600,
                          args=args, extra_env={"RUDDER_DIST_BUCKET_MB": "0.002"},
                          task_ids=False)
    assert_same_weights(ranks, reference(tmp_path / "one", args))
    facts = launching.facts(ranks[0])
    assert facts["buckets"] > 1
    steps_after_the_first = 3
    assert facts["started_in_backward"] == facts["buckets"] * steps_after_the_first


def test_server_and_scheduler_roles_exit_at_once() -> None:
    import subprocess

    for role in ("server", "scheduler"):
        env = launching.job_env(2, 1, launching.free_port(), extra={"DMLC_ROLE": role})
        done = subprocess.run([sys.executable, "-c", "import engine; print('trained')"],
                              env=env, capture_output=True, text=True, timeout=300)
        assert (done.returncode, done.stdout) == (0, "")
