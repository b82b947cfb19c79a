"""A rank that dies, stops or cannot be reached never hangs the others (real processes).

Each case waits at most a few seconds past RUDDER_DIST_TIMEOUT (set low here); the bounds
below only catch a hang (a loaded machine may be slow), they time nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.engine.distributed import launching

pytestmark = pytest.mark.slow

SCRIPT = launching.SCRIPTS / "failing_rank.py"
HANG = 120.0  # far beyond any timeout below: reaching it means something hung


def _start(tmp_path: Path, mode: str, timeout: str) -> launching.Job:
    return launching.launch(sys.executable, SCRIPT, tmp_path, 2, args=[mode], servers=0,
                            scheduler=False, extra_env={"RUDDER_DIST_TIMEOUT": timeout})


def _exit_of(proc: subprocess.Popen[str], within: float) -> tuple[int, str, float]:
    began = time.monotonic()
    try:
        output, _ = proc.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
        pytest.fail(f"still running {within:.0f} s later (hung):\n{output[-2000:]}")
    return proc.returncode, output, time.monotonic() - began


def test_killed_rank_stops_the_others_at_once(tmp_path: Path) -> None:
    """kill -9: its sockets close, Gloo reports it on the next collective (no timeout
    wait: the collective timeout is 60 s here, and rank 0 must not need it)."""
    job = _start(tmp_path, "kill", "60")
    try:
        dead = job.procs["worker1"]
        dead.wait(timeout=HANG)
        assert dead.returncode == -signal.SIGKILL
        code, output, waited = _exit_of(job.procs["worker0"], within=HANG)
    finally:
        job.kill()
    assert code != 0
    assert "DistributedError: rank 0 of 2" in output
    assert "a peer closed its connection (a rank died or was killed)" in output
    assert waited < 60, f"rank 0 waited {waited:.0f} s: it hit the timeout instead"


def test_stopped_rank_makes_the_others_time_out(tmp_path: Path) -> None:
    """SIGSTOP: the sockets stay open, so the others wait out RUDDER_DIST_TIMEOUT."""
    job = _start(tmp_path, "stop", "3")
    stopped = job.procs["worker1"]
    try:
        code, output, _ = _exit_of(job.procs["worker0"], within=HANG)
    finally:
        if stopped.poll() is None:
            os.kill(stopped.pid, signal.SIGKILL)
        job.kill()
    assert code != 0
    assert "timed out after 3 s waiting for the other ranks" in output


def _alone(tmp_path: Path, rank: int) -> tuple[int, str]:
    """Rank ``rank`` of 2 started alone (RUDDER_DIST_TIMEOUT=3): (exit status, output)."""
    env = launching.job_env(2, 0, launching.free_port(),
                            extra={"DMLC_ROLE": "worker", "DMLC_TASK_ID": str(rank),
                                   "RUDDER_DIST_TIMEOUT": "3"})
    proc = subprocess.Popen([sys.executable, str(SCRIPT), str(tmp_path), "kill"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    code, output, _ = _exit_of(proc, within=HANG)
    return code, output


def test_a_rank_that_cannot_reach_rank_0_fails_within_the_timeout(tmp_path: Path) -> None:
    """Rank 1 of 2 with nobody listening at rank 0's address."""
    code, output = _alone(tmp_path, 1)
    assert code != 0
    assert "RendezvousError: rank 1 could not reach rank 0 at 127.0.0.1:" in output
    assert "within 3 s" in output


def test_rank_0_alone_times_out_waiting_for_the_others(tmp_path: Path) -> None:
    code, output = _alone(tmp_path, 0)
    assert code != 0
    assert "DistributedError: rank 0 of 2: connecting the ranks (Gloo) failed: timed out" \
        in output


def test_without_torch_the_engine_trains_and_dist_names_the_extra(tmp_path: Path) -> None:
    """A `torch` that cannot be imported (as on an install without the `dist` extra)."""
    fake = tmp_path / "hide" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named torch')\n")
    code = (
        "import engine as mx\n"
        "from engine import autograd, gluon\n"
        "net = gluon.nn.Dense(2, in_units=3); net.initialize()\n"
        "trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1})\n"
        "with autograd.record():\n"
        "    loss = net(mx.nd.ones((4, 3))).sum()\n"
        "loss.backward(); trainer.step(4); print('local training works')\n"
        "try:\n"
        "    mx.kv.create('dist_sync')\n"
        "except ImportError as err:\n"
        "    print('ImportError:', err)\n")
    env = launching.job_env(1, 0, launching.free_port(),
                            extra={"PYTHONPATH": f"{tmp_path / 'hide'}{os.pathsep}"
                                                 f"{launching.REPO}"})
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=HANG)
    assert done.returncode == 0, done.stderr
    assert "local training works" in done.stdout
    assert "ImportError: distributed training needs PyTorch's Gloo collectives: install " \
           "Rudder's `dist` extra" in done.stdout
