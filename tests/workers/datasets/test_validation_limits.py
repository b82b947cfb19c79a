"""The validator's memory and its refusals of oversized CSV fields (issue 25 items 5
and 6): checked in the process that validates, with the worker's own code."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core import repositories
from core.db import session_scope
from core.models import new_id
from core.storage import LocalStore, dataset_key
from tests.rss import MIB
from tests.workers.datasets import files
from tests.workers.datasets.test_validate import _validate

ROOT = Path(__file__).resolve().parents[3]
# What validation may add to the process, whichever is lower (issue 25 item 5).
BUDGET_FACTOR = 4
BUDGET_CAP = 256 * MIB


def _store_csv(store: LocalStore, path: Path) -> str:
    """A completed upload of the CSV at ``path``, waiting for validation."""
    dataset_id = new_id()
    key = f"datasets/{dataset_id}/big.csv"
    store.put_file(key, path)
    size = path.stat().st_size
    with session_scope() as session:
        user = repositories.create_user(session, name=f"u-{dataset_id[:8]}")
        repositories.create_dataset(
            session, owner_id=user.id, id=dataset_id, name="big", format="csv",
            status="validating", storage_key=key, size=size, sha256="", num_rows=0,
            feature_shape=[], dtype="", num_classes=None,
            files=[{"path": "big.csv", "key": key, "size": size}],
        )
    return dataset_id


def test_a_47_mib_csv_validates_within_its_memory_budget(
    worker_env: dict[str, str], tmp_path: Path
) -> None:
    """Before: the worker grew by 1.6-1.8 GB (33-36x the file). Now the validating
    process may grow by at most 4x the file or 256 MiB, whichever is lower; measured from
    /proc in that process (tests/workers/datasets/measure_validation.py)."""
    store = LocalStore(worker_env["RUDDER_STORAGE_URL"].removeprefix("file://"))
    path = tmp_path / "big.csv"
    rows = files.write_csv(path, 47 * MIB)
    dataset_id = _store_csv(store, path)
    path.unlink()
    done = subprocess.run(
        [sys.executable, "-m", "tests.workers.datasets.measure_validation", dataset_id],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    assert measured["status"] == "ready"
    size = store.size(f"datasets/{dataset_id}/big.csv")
    grew = measured["rss_peak"] - measured["rss_before"]
    assert grew <= min(BUDGET_FACTOR * size, BUDGET_CAP), (
        f"validating {size / MIB:.0f} MiB grew the process by {grew / MIB:.0f} MiB")
    with session_scope() as session:
        row = repositories.get_dataset(session, dataset_id=dataset_id)
        assert row is not None and (row.num_rows, row.feature_shape) == (rows, [20])
    # The CSV was converted once, to the npz the training loader reads.
    converted = io.BytesIO(store.get(dataset_key(dataset_id, "npz")))
    with np.load(converted, allow_pickle=False) as arrays:
        assert arrays["data"].shape == (rows, 20) and arrays["data"].dtype == np.float32
        assert arrays["label"].dtype == np.int64


@pytest.mark.parametrize("quoted", [False, True])
def test_a_field_past_the_csv_limit_names_the_line_and_the_limit(
    worker_env: dict[str, str], quoted: bool
) -> None:
    """Before: ``_csv.Error`` made it "could not be read (Error)" (a 500 in the api)."""
    store = LocalStore(worker_env["RUDDER_STORAGE_URL"].removeprefix("file://"))
    field = "1" * 131_073
    if quoted:
        field = f'"{field}"'
    raw = f"x,label\n1,0\n{field},1\n".encode()
    row = _validate(store, "csv", {"a.csv": raw})
    assert row["status"] == "invalid"
    assert "line 3" in row["reason"] and "131072" in row["reason"], row["reason"]
