"""Recovery times of the service (issue 14): take-over after kill -9 of a worker, and the
re-send of queued jobs after Redis restarts empty. Real processes, one run, loopback.

  take-over  API + two workers (solo pool, as `rudder up` and the e2e tests run them) on
             PostgreSQL; a long job; ``--kills`` times: kill -9 the worker holding the
             job's lease, time until another worker holds it, start a fresh worker.
             ``--load N`` runs N busy processes meanwhile: the job's attempts must equal
             the kills (a lease that lapsed under load would be a false take-over).
  re-send    API only; three queued jobs; ``--restarts`` times: kill -9 Redis, start it
             empty, time until all three messages are back in the queue.

Uses the product's default lease TTL and watchdog interval (workers/settings.py).

    .venv/bin/python bench/service_takeover.py --kills 6 --restarts 5 --load 2
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import redis

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from core.channel import lease_key  # noqa: E402
from rudder.client import Client  # noqa: E402
from tests.e2e.conftest import example_spec  # noqa: E402
from tests.e2e.harness import Stack, stack_env  # noqa: E402
from tests.restartable_redis import RedisProcess  # noqa: E402
from tests.services import postgres_database, wait_until  # noqa: E402


def _burn() -> None:
    while True:
        pass


@contextmanager
def cpu_load(processes: int) -> Iterator[None]:
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(processes)]
    for burner in burners:
        burner.start()
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.join()


@contextmanager
def service(home: Path) -> Iterator[tuple[Stack, RedisProcess, Client]]:
    with ExitStack() as stack_of:
        database_url = stack_of.enter_context(postgres_database("rudder_bench"))
        broker = stack_of.enter_context(RedisProcess())
        env = stack_env(database_url, broker.url, f"file://{home / 'objects'}")
        env.pop("RUDDER_WORKER_LEASE_TTL_SECONDS")
        env.pop("RUDDER_WORKER_WATCHDOG_INTERVAL_SECONDS")
        env["RUDDER_WORKER_MAX_ATTEMPTS"] = "100"  # more kills than the default gives up at
        stack = Stack(env=env, logs=home)
        stack_of.callback(stack.stop)
        stack.start_api()
        stack.token = stack.issue_token("bench")
        client = stack_of.enter_context(Client(stack.api_url, stack.token, timeout=30))
        yield stack, broker, client


def _holder(broker: RedisProcess, job_id: str) -> str | None:
    connection = redis.Redis.from_url(broker.url, decode_responses=True)
    try:
        value = connection.get(lease_key(job_id))
        return str(value) if value else None
    finally:
        connection.close()


def take_overs(kills: int, load: int) -> tuple[list[float], int]:
    """Seconds from each kill to the next holder; and the job's attempts at the end."""
    times: list[float] = []
    with tempfile.TemporaryDirectory() as home, service(Path(home)) as (stack, broker, client):
        workers = [stack.start_worker() for _ in range(2)]
        job = client.submit(example_spec(name="take-over-bench", epochs=5000))
        with cpu_load(load):
            for _ in range(kills):
                holder = wait_until(lambda: _holder(broker, job["id"]), 120, interval=0.05,
                                    what="a holder")
                wait_until(lambda: client.get_job(job["id"])["status"] == "running", 60,
                           interval=0.1, what="running")
                time.sleep(3)  # a few renewals in: the lease is in its steady state
                [victim] = [w for w in workers if f":{w.pid}:" in holder]
                stack.kill_worker(victim)
                killed = time.monotonic()
                wait_until(lambda h=holder: (n := _holder(broker, job["id"])) and n != h,
                           120, interval=0.02, what="a new holder")
                times.append(time.monotonic() - killed)
                print(f"  take-over {len(times)}: {times[-1]:.2f}s", flush=True)
                workers.remove(victim)
                workers.append(stack.start_worker())
                time.sleep(5)  # the new worker is up before the next kill
            attempts = int(client.get_job(job["id"])["attempts"])
        client.cancel(job["id"])
    return times, attempts


def resends(restarts: int) -> list[float]:
    times: list[float] = []
    with tempfile.TemporaryDirectory() as home, service(Path(home)) as (_stack, broker, client):
        for n in range(3):
            client.submit(example_spec(name=f"resend-{n}", epochs=1))

        def waiting() -> int:
            connection = redis.Redis.from_url(broker.url)
            try:
                return int(connection.llen("cpu"))
            finally:
                connection.close()

        wait_until(lambda: waiting() == 3, 30, what="three messages")
        for _ in range(restarts):
            broker.kill()
            broker.start(empty=True)
            returned = time.monotonic()
            wait_until(lambda: waiting() == 3, 120, interval=0.02, what="the messages back")
            times.append(time.monotonic() - returned)
            print(f"  re-send {len(times)}: {times[-1]:.2f}s", flush=True)
            time.sleep(2)
    return times


def _summary(what: str, times: list[float]) -> str:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return (f"{what}: n={len(times)} median={statistics.median(times):.2f}s "
            f"p95={p95:.2f}s max={ordered[-1]:.2f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=6)
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--load", type=int, default=0, help="busy processes during kills")
    args = parser.parse_args()
    lines = []
    if args.kills:
        times, attempts = take_overs(args.kills, args.load)
        lines.append(_summary(f"take-over after kill -9 (load {args.load})", times)
                     + f"; attempts={attempts} for {args.kills} kills "
                     f"({'no' if attempts == args.kills else attempts - args.kills} "
                     "false take-overs)")
    if args.restarts:
        lines.append(_summary("re-send after Redis restarted empty", resends(args.restarts)))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
