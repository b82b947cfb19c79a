"""Issue 26 item 3: data-set validation has its own queue and validator process, so an
upload is checked while every training worker is busy (it used to wait in the training
queue for minutes while the CLI said "a worker is validating it")."""

from __future__ import annotations

import hashlib
import subprocess
import sys

from rudder.client import Client
from tests.e2e.conftest import example_spec
from tests.e2e.harness import ROOT, Stack
from tests.services import wait_until


def test_validation_does_not_wait_behind_a_training_run(stack: Stack, client: Client) -> None:
    busy = client.submit(example_spec(name="keeps-the-worker-busy", epochs=5000))
    try:
        wait_until(lambda: client.get_job(busy["id"])["status"] == "running", 120,
                   interval=0.2, what="the training worker to be busy")
        raw = b"x,y,label\n" + b"".join(b"%d,%d,%d\n" % (i, -i, i % 2) for i in range(500))
        upload = client.create_upload("while-busy", [("t.csv", len(raw))])
        client._request("PUT", f"/v1/datasets/uploads/{upload['id']}/parts/1", content=raw,
                        headers={"X-Part-SHA256": hashlib.sha256(raw).hexdigest()})
        dataset = client.complete_upload(upload["id"])
        assert dataset["validation"] in ("queued", "running")
        ready = wait_until(lambda: (d := client.dataset(dataset["id"]))["status"] == "ready"
                           and d, 60, interval=0.2, what="the validator")
        assert ready["num_rows"] == 500 and ready["validation"] is None
        assert client.get_job(busy["id"])["status"] == "running"  # training went on
    finally:
        client.cancel(busy["id"])


def test_the_validator_loads_no_engine() -> None:
    """It starts fast and stays small: validation needs numpy and Pillow, not the engine."""
    probe = ("import importlib, sys, workers.validation_app as v\n"
             "[importlib.import_module(m) for m in v.app.conf.imports]\n"
             "print(sorted(m for m in sys.modules if m == 'engine' or m.startswith('engine.')))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"
