"""Peak memory of the validator while it validates a large CSV, against the file's size.

Generates a numeric CSV of ``--mb`` MiB under $TMPDIR (32 float features and an integer
label per row; the default 1 GiB is about 3.2 million rows, within the 5 million a set may
have), stores it as a completed upload in a local object store with a SQLite database,
then runs ``rudder.validate_dataset`` in a child process
(tests/workers/datasets/measure_validation.py: the worker's own code) and reads that
process's peak RSS (VmHWM, /proc) against its RSS before the validation started. Issue
25 item 5's budget is the lower of 4x the file and 256 MiB; before streaming, a 47 MiB
CSV grew the worker by 1.6-1.8 GB.

    .venv/bin/python bench/dataset_validation.py --mb 1024
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.rss import MIB  # noqa: E402
from tests.workers.datasets.files import write_csv  # noqa: E402

BUDGET_FACTOR = 4
BUDGET_CAP = 256 * MIB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=1024, help="CSV size in MiB")
    parser.add_argument("--features", type=int, default=32, help="feature columns")
    args = parser.parse_args()

    from core import repositories
    from core.db import make_engine, make_sessionmaker, session_scope
    from core.migrate import upgrade
    from core.models import new_id

    with tempfile.TemporaryDirectory(prefix="rudder-bench-validation-") as home:
        database = f"sqlite:///{home}/rudder.db"
        upgrade(database)
        dataset_id = new_id()
        key = f"datasets/{dataset_id}/big.csv"
        path = Path(home) / "objects" / key
        path.parent.mkdir(parents=True)
        rows = write_csv(path, args.mb * MIB, features=args.features)  # straight into the store
        size = path.stat().st_size
        engine = make_engine(database)
        with session_scope(make_sessionmaker(engine)) as session:
            owner = repositories.create_user(session, name="bench")
            repositories.create_dataset(
                session, owner_id=owner.id, id=dataset_id, name="big", format="csv",
                status="validating", storage_key=key, size=size, sha256="", num_rows=0,
                feature_shape=[], dtype="", num_classes=None,
                files=[{"path": "big.csv", "key": key, "size": size}],
            )
        engine.dispose()
        env = {k: v for k, v in os.environ.items() if not k.startswith("RUDDER_")}
        env.update({"RUDDER_DATABASE_URL": database,
                    "RUDDER_STORAGE_URL": f"file://{home}/objects",
                    "PYTHONPATH": str(REPO)})
        done = subprocess.run(
            [sys.executable, "-m", "tests.workers.datasets.measure_validation", dataset_id],
            cwd=REPO, env=env, capture_output=True, text=True, check=True,
        )
        measured = json.loads(done.stdout.strip().splitlines()[-1])
        engine = make_engine(database)
        with session_scope(make_sessionmaker(engine)) as session:
            row = repositories.get_dataset(session, dataset_id=dataset_id)
            reason = row.reason if row is not None else "row gone"
        engine.dispose()
    grew = measured["rss_peak"] - measured["rss_before"]
    budget = min(BUDGET_FACTOR * size, BUDGET_CAP)
    print(json.dumps({
        "csv_mib": round(size / MIB, 1), "rows": rows, "status": measured["status"],
        "reason": reason,
        "validator_rss_before_mib": round(measured["rss_before"] / MIB, 1),
        "validator_rss_peak_mib": round(measured["rss_peak"] / MIB, 1),
        "growth_mib": round(grew / MIB, 1),
        "growth_over_file_size": round(grew / size, 4),
        "budget_mib": round(budget / MIB, 1), "within_budget": grew <= budget,
        "seconds": round(measured["seconds"], 1),
        "mib_per_second": round(size / MIB / measured["seconds"], 1),
    }, indent=2))


if __name__ == "__main__":
    main()
