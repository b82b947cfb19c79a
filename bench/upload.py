"""Chunked dataset upload throughput to the local store, and what it costs the api.

Starts the api as ``rudder up`` serves it (uvicorn, SQLite, local object store, a private
redis-server), then uploads ``--mb`` MB in ``--part-mb`` MB parts over ``--clients``
keep-alive connections and completes the upload. Reported: MB/s from create to
complete (wall clock), the api process's CPU seconds per MB (Linux /proc), and its peak
RSS (VmHWM), which must stay flat however large the upload is. The client reuses one
random buffer as every part (its sha256 computed once) so the client costs little of the
2 shared cores.

    .venv/bin/python bench/upload.py --mb 2048 --part-mb 16 --clients 2
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from service_submit import SECRET, process_cpu_seconds, uvicorn_server  # noqa: E402

from tests.services import redis_server  # noqa: E402


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=1024, help="upload size in MB")
    parser.add_argument("--part-mb", type=int, default=16, help="part size in MB")
    parser.add_argument("--clients", type=int, default=2, help="parallel connections")
    args = parser.parse_args()

    from core.db import make_engine, make_sessionmaker
    from core.migrate import upgrade
    from core.tokens import issue_token

    part_size = args.part_mb * 1024 * 1024
    total = args.mb * 1024 * 1024
    buffer = os.urandom(part_size)
    digest = hashlib.sha256(buffer).hexdigest()
    with tempfile.TemporaryDirectory(prefix="rudder-bench-upload-") as home, \
            redis_server() as redis_url:
        database_url = f"sqlite:///{home}/rudder.db"
        upgrade(database_url)
        engine = make_engine(database_url)
        _, token = issue_token("bench", factory=make_sessionmaker(engine), secret=SECRET)
        engine.dispose()
        env = {"RUDDER_DATABASE_URL": database_url, "RUDDER_REDIS_URL": redis_url,
               "RUDDER_STORAGE_URL": f"file://{home}/objects", "RUDDER_SECRET_KEY": SECRET,
               "RUDDER_LIMITS__MAX_DATASET_BYTES_PER_USER": str(4 * total)}
        headers = {"Authorization": f"Bearer {token}"}
        with uvicorn_server("api.main:create_app", env) as (url, pid):
            clients = [httpx.Client(base_url=url, headers=headers, timeout=120)
                       for _ in range(args.clients)]
            rss_before = peak_rss_mb(pid)
            cpu_before = process_cpu_seconds(pid)
            started = time.perf_counter()
            upload = clients[0].post("/v1/datasets/uploads", json={
                "name": "bench", "part_size": part_size,
                "files": [{"path": "bench.rec", "size": total},
                          {"path": "bench.idx", "size": 4}],
            }).json()
            rec_parts = upload["files"][0]["parts"]

            def send(number: int) -> None:
                client = clients[number % len(clients)]
                size = min(part_size, total - (number - 1) * part_size)
                body = buffer if size == part_size else buffer[:size]
                sha = digest if size == part_size else hashlib.sha256(body).hexdigest()
                answer = client.put(f"/v1/datasets/uploads/{upload['id']}/parts/{number}",
                                    content=body, headers={"X-Part-SHA256": sha})
                answer.raise_for_status()

            with ThreadPoolExecutor(args.clients) as pool:
                list(pool.map(send, range(1, rec_parts + 1)))
            clients[0].put(f"/v1/datasets/uploads/{upload['id']}/parts/{rec_parts + 1}",
                           content=b"0\t0\n",
                           headers={"X-Part-SHA256": hashlib.sha256(b"0\t0\n").hexdigest()})
            sent = time.perf_counter()
            done = clients[0].post(f"/v1/datasets/uploads/{upload['id']}/complete")
            done.raise_for_status()
            finished = time.perf_counter()
            cpu = process_cpu_seconds(pid) - cpu_before
            report = {
                "mb": args.mb, "part_mb": args.part_mb, "clients": args.clients,
                "parts_mb_per_s": round(args.mb / (sent - started), 1),
                "complete_s": round(finished - sent, 2),
                "end_to_end_mb_per_s": round(args.mb / (finished - started), 1),
                "api_cpu_s_per_mb": round(cpu / args.mb, 5),
                "api_peak_rss_mb_before": round(rss_before, 1),
                "api_peak_rss_mb": round(peak_rss_mb(pid), 1),
            }
            for client in clients:
                client.close()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
