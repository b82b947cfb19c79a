"""Run a training script as N ranks on this machine: ``python -m engine.launch -n N script.py``.

Each rank is a process of the same script with the environment MXNet's own local launcher
(``tools/launch.py --launcher local``) gives a worker: ``DMLC_ROLE=worker``,
``DMLC_PS_ROOT_URI``/``DMLC_PS_ROOT_PORT`` (where rank 0 listens), ``DMLC_NUM_WORKER``,
``DMLC_NUM_SERVER=0`` and ``DMLC_TASK_ID`` (the rank). So a script written for MXNet's
``dist_sync`` runs unchanged, and ``mx.kv.create('dist_sync').rank`` is its rank.

Several machines: start the launcher on each with the same ``--host`` (rank 0's machine),
``--port`` and ``--world-size``, and ``--first-rank`` set to the first rank it runs::

    host A$ python -m engine.launch -n 2 --world-size 4 --host A --port 29500 train.py
    host B$ python -m engine.launch -n 2 --world-size 4 --first-rank 2 --host A \
                --port 29500 train.py

The launcher waits for every rank; when one fails the others stop on their own (their next
collective fails at once, or after ``--timeout`` seconds for a rank that hangs); any still
running a grace period later are terminated. Its exit status is the first failure's.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time

GRACE_SECONDS = 10.0


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def rank_env(base: dict[str, str], rank: int, world_size: int, host: str, port: int,
             timeout: float | None) -> dict[str, str]:
    """The environment of one rank (MXNet's worker variables)."""
    env = dict(base)
    env.update({"DMLC_ROLE": "worker", "DMLC_PS_ROOT_URI": host, "DMLC_PS_ROOT_PORT": str(port),
                "DMLC_NUM_WORKER": str(world_size), "DMLC_NUM_SERVER": "0",
                "DMLC_TASK_ID": str(rank)})
    if timeout is not None:
        env["RUDDER_DIST_TIMEOUT"] = str(timeout)
    return env


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m engine.launch",
        description="Run a script as N data-parallel ranks (MXNet's dist_sync).")
    parser.add_argument("-n", "--num-workers", type=int, required=True,
                        help="ranks to start on this machine")
    parser.add_argument("--world-size", type=int, default=None,
                        help="ranks in the whole job (default: -n)")
    parser.add_argument("--first-rank", type=int, default=0,
                        help="rank of the first process started here (several machines)")
    parser.add_argument("--host", default="127.0.0.1", help="rank 0's address")
    parser.add_argument("--port", type=int, default=None,
                        help="rank 0's port (default: a free one; give it for several machines)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds a collective waits for the others (RUDDER_DIST_TIMEOUT, "
                             "default 60)")
    parser.add_argument("script", help="the training script")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    args = parser.parse_args(argv)
    world = args.world_size or args.num_workers
    if args.num_workers < 1 or not 0 <= args.first_rank or \
            args.first_rank + args.num_workers > world:
        parser.error(f"ranks {args.first_rank}..{args.first_rank + args.num_workers - 1} do "
                     f"not fit in a world of {world}")
    if args.port is None and (args.first_rank != 0 or world != args.num_workers):
        parser.error("--port is required when the job spans several machines")
    args.world_size = world
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    port = args.port if args.port is not None else free_port(args.host)
    procs: list[subprocess.Popen[bytes]] = []
    for i in range(args.num_workers):
        env = rank_env(dict(os.environ), args.first_rank + i, args.world_size, args.host,
                       port, args.timeout)
        procs.append(subprocess.Popen([sys.executable, args.script, *args.args], env=env))

    def forward(signum: int, _frame: object) -> None:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signum)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    from .distributed.rendezvous import timeout_from_env

    timeout = args.timeout if args.timeout is not None else timeout_from_env()
    return supervise(procs, grace=timeout + GRACE_SECONDS)


def supervise(procs: list[subprocess.Popen[bytes]], grace: float = GRACE_SECONDS) -> int:
    """Wait for all; after the first failure give the rest ``grace`` seconds (enough to
    time out on a hung peer), then end them."""
    status = 0
    deadline = None
    while any(p.poll() is None for p in procs):
        if status == 0:
            failed = [p.returncode for p in procs if p.returncode not in (None, 0)]
            if failed:
                status = failed[0]
                deadline = time.monotonic() + grace
        if deadline is not None and time.monotonic() > deadline:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
            break
        time.sleep(0.05)
    for proc in procs:
        proc.wait()
        if status == 0 and proc.returncode != 0:
            status = proc.returncode
    return 128 - status if status < 0 else status


if __name__ == "__main__":
    sys.exit(main())
