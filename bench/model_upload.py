"""What ``POST /v1/models`` spends checking an upload before it stores anything.

    .venv/bin/python bench/model_upload.py [--model resnet18_v1] [--repeat 5]

Exports a zoo network with the engine (random weights; resnet18_v1 with 10 classes has a
~45 MB params file), then times the api's own checks on the two files, as the upload
route runs them: parse + known ops + shape inference of the symbol for a 1x3x32x32 input
(``inspect_symbol``), then reading the params file with the bounded MXNet-format reader and
matching every name and shape (``check_params``), plus the sha256 of both. Target (issue
12): a 50 MB params file and its symbol in <= 2 s. Median and max of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="resnet18_v1")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    import engine as mx
    from api.services.model_inspection import check_params, inspect_symbol
    from engine.gluon.model_zoo import vision

    net = vision.get_model(args.model, classes=args.classes)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    net(mx.nd.zeros((1, 3, 32, 32)))
    with tempfile.TemporaryDirectory() as folder:
        net.export(str(Path(folder) / "net"), epoch=0)
        symbol = (Path(folder) / "net-symbol.json").read_bytes()
        params = (Path(folder) / "net-0000.params").read_bytes()
    times = []
    summary = None
    for _ in range(args.repeat):
        started = time.perf_counter()
        summary = inspect_symbol(symbol, "data", [1, 3, 32, 32])
        check_params(params, summary, max_bytes=len(params))
        hashlib.sha256(symbol).hexdigest()
        hashlib.sha256(params).hexdigest()
        times.append(time.perf_counter() - started)
    assert summary is not None
    print(f"{args.model}: symbol {len(symbol) / 1e6:.2f} MB ({sum(summary.ops.values())} ops), "
          f"params {len(params) / 1e6:.1f} MB ({summary.parameter_count:,} values)")
    print(f"upload checks: median {statistics.median(times):.3f} s, max {max(times):.3f} s "
          f"over {args.repeat} runs (target <= 2 s for 50 MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
