"""The api's inspector processes (api/services/inspector.py), real child processes: they
run under their limits, a question past the wall-clock limit is answered with why and the
process replaced, a dead process is restarted, an upload in one lane does not hold up the
other, and the api process itself never loads the engine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.services.inspector import InspectionFailed, Inspector
from core.config import InspectorSettings
from core.inspection import InspectUpload, PreviewSchedule

ROOT = Path(__file__).resolve().parents[2]
PREVIEW = PreviewSchedule(scheduler="factor", params={"step": 10, "factor": 0.5,
                                                     "base_lr": 0.1},
                          step=20, learning_rate=0.01, mode="scale")


def _chain(length: int) -> str:
    nodes = [{"op": "null", "name": "data", "inputs": []}] + [
        {"op": "sin", "name": f"n{i}", "inputs": [[i, 0, 0]]} for i in range(length)]
    return json.dumps({"nodes": nodes, "arg_nodes": [0], "heads": [[length, 0, 0]]})


@pytest.fixture(scope="module")
def inspector() -> Iterator[Inspector]:
    # its own processes (not the process-wide ones the apps share): the tests kill them,
    # and each test asks first, so it finds them running whatever ran before
    made = Inspector(InspectorSettings(wall_seconds=1.5, memory_bytes=1536 * 2**20,
                                       cpu_seconds=5))
    yield made
    made.close()


def _pid(inspector: Inspector, lane: str) -> int:
    popen = getattr(inspector, lane).processes[0].popen
    assert popen is not None and popen.poll() is None
    return int(popen.pid)


def test_a_process_runs_under_its_memory_limit_and_answers(inspector: Inspector) -> None:
    answer = inspector.check(PREVIEW)
    assert answer.schedule is not None and answer.schedule.preview is not None
    assert answer.schedule.preview["factor"] == pytest.approx(0.01 / 0.05)
    limits = Path(f"/proc/{_pid(inspector, 'checks')}/limits").read_text()
    address_space = next(line for line in limits.splitlines()
                         if line.startswith("Max address space"))
    assert address_space.split()[3:5] == [str(1536 * 2**20)] * 2


def _small_upload(inspector: Inspector) -> InspectUpload:
    return InspectUpload(symbol=_chain(3), input_name="data", input_shape=[1],
                         bounds=inspector.bounds)


def test_a_question_past_the_time_limit_is_answered_and_the_process_replaced(
    inspector: Inspector,
) -> None:
    inspector.inspect_upload(_small_upload(inspector), None)
    stuck = _pid(inspector, "uploads")
    os.kill(stuck, signal.SIGSTOP)  # as a process busy past any limit would look
    with pytest.raises(InspectionFailed, match="longer than 1.5 s"):
        inspector.inspect_upload(_small_upload(inspector), None)
    answer = inspector.inspect_upload(_small_upload(inspector), None)
    assert answer.summary is not None and answer.summary.ops == {"sin": 3}
    assert _pid(inspector, "uploads") != stuck
    assert not Path(f"/proc/{stuck}").exists()  # killed and reaped


def test_a_dead_process_is_restarted_at_the_next_question(inspector: Inspector) -> None:
    inspector.check(PREVIEW)
    pid = _pid(inspector, "checks")
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    changed = PREVIEW.model_copy(update={"step": 21})  # not a cached answer
    assert inspector.check(changed).schedule is not None
    assert _pid(inspector, "checks") != pid


def test_a_slow_upload_does_not_hold_up_the_other_lane(inspector: Inspector) -> None:
    inspector.check(PREVIEW)
    inspector.inspect_upload(_small_upload(inspector), None)
    os.kill(_pid(inspector, "uploads"), signal.SIGSTOP)  # busy with an upload
    finished: list[str] = []

    def upload() -> None:
        with pytest.raises(InspectionFailed):
            inspector.inspect_upload(_small_upload(inspector), None)
        finished.append("upload")

    thread = threading.Thread(target=upload)
    thread.start()
    time.sleep(0.2)
    for step in range(30, 35):  # each a fresh question, answered while the upload waits
        assert inspector.check(PREVIEW.model_copy(update={"step": step})).schedule is not None
        finished.append("check")
    thread.join()
    assert finished == ["check"] * 5 + ["upload"]


def test_the_api_process_never_loads_the_engine() -> None:
    """Importing every api module and inspecting an upload, as a fresh process: the engine
    is loaded only by the inspector."""
    script = """
import importlib, pkgutil, sys
import api
for info in pkgutil.walk_packages(api.__path__, "api."):
    importlib.import_module(info.name)
from api.services.inspector import Inspector
from api.services.model_inspection import inspect_upload
from core.config import InspectorSettings
inspector = Inspector(InspectorSettings())
graph = b'{"nodes": [{"op": "null", "name": "data", "inputs": []}, ' \\
        b'{"op": "relu", "name": "r", "inputs": [[0, 0, 0]]}], "heads": [[1, 0, 0]]}'
summary = inspect_upload(inspector, symbol=graph, params=None, input_name="data",
                         input_shape=[2, 3])
inspector.close()
print(summary.output_shapes, sorted(m for m in sys.modules if m.split(".")[0] == "engine"))
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, check=True)
    assert out.stdout.strip() == "[[2, 3]] []", out.stdout + out.stderr
