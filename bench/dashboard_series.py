"""The dashboard's history endpoint: ``GET /v1/jobs/{id}/metrics/series`` over 100k points.

    .venv/bin/python bench/dashboard_series.py [--repeats 15]

A job with 5 metrics x 20,000 steps (the job page's 100k-point case) is stored on SQLite
(the embedded default) and on PostgreSQL (127.0.0.1:5432); the real api runs on uvicorn
and is asked over HTTP for the chart's series thinned to 1000 points per metric. Printed:
median and best wall time per request, and the api process's share measured in-process
(query + thinning + JSON), since other load on this machine moves wall time the most.
Target (issue 16): <= 100 ms for 100k points.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

METRICS = ("train_loss", "val_loss", "train_accuracy", "val_accuracy", "lr")
STEPS = 20_000
TARGET_MS = 100.0


def _seed(api: object, steps: int) -> tuple[str, dict[str, str]]:
    from core import repositories
    from tests.api.specs import digits_spec

    _, headers = api.make_user()  # type: ignore[attr-defined]
    job_id = api.client.post(  # type: ignore[attr-defined]
        "/v1/jobs", json=digits_spec(name="series-bench"), headers=headers
    ).json()["id"]
    with api.sessions() as session:  # type: ignore[attr-defined]
        repositories.add_metric_points(session, job_id=job_id, points=[
            repositories.MetricPointIn(step=s, epoch=(s - 1) // 2000, name=name,
                                       value=1.0 / s + hash((name, s)) % 97 / 1e4)
            for name in METRICS for s in range(1, steps + 1)
        ])
        session.commit()
    return job_id, headers


def _measure(database_url: str, redis_url: str, home: Path, repeats: int) -> tuple[float, ...]:
    from api.services.dashboard import metric_series
    from core.config import Settings
    from tests.conftest import TEST_SECRET, serve

    settings = Settings(
        environment="test", secret_key=TEST_SECRET, database_url=database_url,
        redis_url=redis_url, storage_url=f"file://{home / 'objects'}",
    )
    with serve(settings) as api:
        job_id, headers = _seed(api, STEPS)
        url = f"/v1/jobs/{job_id}/metrics/series?max_points=1000"
        response = api.client.get(url, headers=headers)
        assert response.status_code == 200, response.text
        assert sum(s["total_points"] for s in response.json()["series"]) == len(METRICS) * STEPS
        walls = []
        for _ in range(repeats):
            started = time.perf_counter()
            api.client.get(url, headers=headers).raise_for_status()
            walls.append((time.perf_counter() - started) * 1000)
        inside = []
        with api.sessions() as session:
            for _ in range(repeats):
                started = time.perf_counter()
                metric_series(session, job_id=job_id, names=None, max_points=1000)
                inside.append((time.perf_counter() - started) * 1000)
    return statistics.median(walls), min(walls), statistics.median(inside)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()

    from core.migrate import upgrade
    from tests.services import postgres_database, redis_server

    print(f"series endpoint, {len(METRICS)} metrics x {STEPS} points, 1000 per metric back")
    print(f"{'database':<12}{'median ms':>11}{'best ms':>9}{'in-process ms':>15}"
          f"{'median / target':>17}")
    with ExitStack() as stack, tempfile.TemporaryDirectory() as home:
        redis_url = stack.enter_context(redis_server())
        sqlite_url = f"sqlite:///{Path(home) / 'rudder.db'}"
        upgrade(sqlite_url)
        postgres_url = stack.enter_context(postgres_database("rudder_bench"))
        for label, url in (("sqlite", sqlite_url), ("postgresql", postgres_url)):
            median, best, inside = _measure(url, redis_url, Path(home) / label, args.repeats)
            print(f"{label:<12}{median:>11.1f}{best:>9.1f}{inside:>15.1f}"
                  f"{median / TARGET_MS:>16.2f}x")


if __name__ == "__main__":
    main()
