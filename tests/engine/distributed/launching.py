"""Start a script as the processes of a distributed job, as MXNet's local launcher does.

``tools/launch.py --launcher local -n N -s S`` runs the same command as one scheduler,
S servers and N workers, telling each its role through ``DMLC_*`` variables (workers also
get ``DMLC_TASK_ID``). :func:`launch` does that for any interpreter: MXNet 1.9.1's (the
oracle, whose scheduler and servers really serve) or Rudder's (whose scheduler and servers
exit at once). Each worker writes its results to ``<out>/rank<r>.npz``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[3]
SCRIPTS = Path(__file__).resolve().parent / "scripts"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def job_env(workers: int, servers: int, port: int, host: str = "127.0.0.1",
            extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    for name in list(env):
        if name.startswith(("DMLC_", "RUDDER_DIST_")) or name in ("MASTER_ADDR", "RANK"):
            del env[name]
    env.update({"DMLC_PS_ROOT_URI": host, "DMLC_PS_ROOT_PORT": str(port),
                "DMLC_NUM_WORKER": str(workers), "DMLC_NUM_SERVER": str(servers),
                "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])})
    env.update(extra or {})
    return env


@dataclass
class Job:
    procs: dict[str, subprocess.Popen[str]]
    out: Path

    def wait(self, timeout: float) -> dict[str, tuple[int, str]]:
        """(exit status, output) of every process; kills what is left at the deadline."""
        deadline = time.monotonic() + timeout
        results = {}
        for name, proc in self.procs.items():
            try:
                output, _ = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                output, _ = proc.communicate()
                results[name] = (-9, f"[killed at the test's deadline]\n{output}")
                continue
            results[name] = (proc.returncode, output)
        return results

    def kill(self) -> None:
        """End what still runs and close every pipe."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


def launch(python: str | Path, script: str | Path, out: Path, workers: int, servers: int = 1,
           args: list[str] | None = None, extra_env: dict[str, str] | None = None,
           scheduler: bool = True, port: int | None = None, task_ids: bool = True) -> Job:
    """Start a scheduler, ``servers`` servers and ``workers`` workers of ``script OUT args``
    (``task_ids=False``: without DMLC_TASK_ID, as launchers other than MXNet's local one)."""
    port = port or free_port()
    env = job_env(workers, servers, port, extra=extra_env)
    command = [str(python), str(script), str(out), *(args or [])]
    roles = ([("scheduler", None)] if scheduler else []) + \
        [("server", None)] * servers + [("worker", r) for r in range(workers)]
    procs: dict[str, subprocess.Popen[str]] = {}
    for k, (role, rank) in enumerate(roles):
        role_env = dict(env, DMLC_ROLE=role)
        if rank is not None and task_ids:
            role_env["DMLC_TASK_ID"] = str(rank)
        name = role if rank is None else f"worker{rank}"
        procs[name if name not in procs else f"{name}{k}"] = subprocess.Popen(
            command, env=role_env, cwd=str(REPO), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
    return Job(procs, out)


def run(python: str | Path, script: str | Path, out: Path, workers: int, timeout: float = 120,
        **kwargs: object) -> list[dict[str, np.ndarray]]:
    """Launch, wait, insist every process succeeded; each worker's saved arrays."""
    job = launch(python, script, out, workers, **kwargs)  # type: ignore[arg-type]
    results = job.wait(timeout)
    failed = {n: r for n, r in results.items() if r[0] != 0}
    assert not failed, "\n".join(f"--- {n} exited {c}:\n{o[-3000:]}" for n, (c, o) in
                                 failed.items())
    return [load(out / f"rank{r}.npz") for r in range(workers)]


def load(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as packed:
        return {name: packed[name] for name in packed.files}


def facts(saved: dict[str, np.ndarray]) -> dict[str, object]:
    return json.loads(str(saved["facts"]))


def engine_launch(n: int, script: str | Path, *args: str, timeout: float = 120,
                  extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m engine.launch -n N script args`` (Rudder's own launcher)."""
    env = job_env(0, 0, 0, extra=extra_env)
    for name in ("DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "DMLC_NUM_WORKER", "DMLC_NUM_SERVER"):
        env.pop(name)
    return subprocess.run([sys.executable, "-m", "engine.launch", "-n", str(n), str(script),
                           *args], env=env, cwd=str(REPO), capture_output=True, text=True,
                          timeout=timeout)
