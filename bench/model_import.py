"""Importing an exported model: a ~50 MB MXNet params file and its symbol JSON (issue 12
target: <= 2 s for ``SymbolBlock.imports``).

The model is a ResNet-18-style network (residual conv blocks with BatchNorm, then a wide
Dense head that brings the parameters to about 50 MB of float32), built and exported by the
engine (``HybridBlock.export``: MXNet's own formats). When `bench/setup` has built the MXNet
1.9.1 anchor, MXNet's ``SymbolBlock.imports`` of the same two files is timed too.

Figures (median of ``--repeats`` runs, seconds): ``read_params`` (the strict reader on the
bytes), ``inspect_symbol_json`` (the validation the service runs: parse, ops, shape
inference for 1x3x224x224), ``imports`` (``gluon.SymbolBlock.imports``: read both files,
build the block, load every parameter) and ``imports+forward`` (plus one forward, batch 1).
Usage: python bench/model_import.py [--repeats 5] [--megabytes 50]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from anchors import anchor_python, run_in_anchor  # noqa: E402

import engine as mx  # noqa: E402
from engine import gluon, nd  # noqa: E402
from engine.ndarray.mxnet_format import read_params  # noqa: E402
from engine.symbol import inspect_symbol_json  # noqa: E402

TARGET_SECONDS = 2.0


class Residual(gluon.HybridBlock):
    def __init__(self, channels: int, stride: int, **kw: object) -> None:
        super().__init__(**kw)
        with self.name_scope():
            self.conv1 = gluon.nn.Conv2D(channels, 3, strides=stride, padding=1, use_bias=False)
            self.bn1 = gluon.nn.BatchNorm()
            self.conv2 = gluon.nn.Conv2D(channels, 3, padding=1, use_bias=False)
            self.bn2 = gluon.nn.BatchNorm()
            self.down = gluon.nn.Conv2D(channels, 1, strides=stride, use_bias=False)

    def hybrid_forward(self, F, x):  # noqa: ANN001, ANN201, N803
        y = F.Activation(self.bn1(self.conv1(x)), act_type="relu")
        y = self.bn2(self.conv2(y))
        return F.Activation(y + self.down(x), act_type="relu")


def build(megabytes: float) -> gluon.HybridBlock:
    net = gluon.nn.HybridSequential(prefix="resnet_")
    with net.name_scope():
        net.add(gluon.nn.Conv2D(64, 7, strides=2, padding=3, use_bias=False),
                gluon.nn.BatchNorm(), gluon.nn.Activation("relu"), gluon.nn.MaxPool2D(3, 2, 1))
        for channels, stride in ((64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1),
                                 (512, 2), (512, 1)):
            net.add(Residual(channels, stride))
        net.add(gluon.nn.GlobalAvgPool2D(), gluon.nn.Flatten())
        body = 11.2e6 * 4  # ResNet-18's convolutions and BatchNorms, in bytes
        classes = max(10, int((megabytes * 1e6 - body) / (513 * 4)))
        net.add(gluon.nn.Dense(classes))
    return net


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--megabytes", type=float, default=50.0)
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="rudder-import-")
    net = build(args.megabytes)
    net.initialize(mx.init.Xavier())
    x = nd.array(np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype("float32"))
    net(x)
    sym_file, params_file = net.export(os.path.join(work, "net"), epoch=0)
    size = os.path.getsize(params_file)
    text = Path(sym_file).read_text()
    blob = Path(params_file).read_bytes()

    def timed(fn) -> float:  # noqa: ANN001
        runs = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            fn()
            runs.append(time.perf_counter() - start)
        return median(runs)

    figures = {
        "read_params": timed(lambda: read_params(blob, max_bytes=1 << 30)),
        "inspect_symbol_json": timed(lambda: inspect_symbol_json(text, {"data": (1, 3, 224, 224)})),
        "imports": timed(lambda: gluon.SymbolBlock.imports(sym_file, ["data"], params_file)),
        "imports+forward": timed(
            lambda: gluon.SymbolBlock.imports(sym_file, ["data"], params_file)(x).wait_to_read()),
    }
    print(f"params file {size / 1e6:.1f} MB, symbol {len(text) / 1e3:.0f} kB "
          f"(median of {args.repeats})")
    for name, seconds in figures.items():
        print(f"  engine {name:<22} {seconds:7.3f} s")
    verdict = "meets" if figures["imports"] <= TARGET_SECONDS else "MISSES"
    print(f"  imports {verdict} the {TARGET_SECONDS:g} s target")
    if anchor_python("mxnet") is not None:
        run = run_in_anchor("mxnet", f"""
import time, mxnet as mx
runs = []
for _ in range({args.repeats}):
    start = time.perf_counter()
    mx.gluon.SymbolBlock.imports({sym_file!r}, ['data'], {params_file!r})
    runs.append(time.perf_counter() - start)
result['imports'] = sorted(runs)[len(runs) // 2]
""", {})
        print(f"  mxnet  {'imports':<22} {run.json['imports']:7.3f} s")


if __name__ == "__main__":
    main()
