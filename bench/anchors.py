"""Run code in the anchor environments that `bench/setup` builds (MXNet 1.9.1, PyTorch 2.13).

The anchors are separate virtual environments, so their code runs in a subprocess. Arrays go in
and come back through `.npz` files loaded with ``allow_pickle=False``; everything else comes back
as JSON. Nothing is ever pickled.

A snippet sees three names:

- ``inputs``: dict of the numpy arrays passed in,
- ``outputs``: dict to fill with arrays (numpy arrays, MXNet NDArrays or torch tensors),
- ``result``: dict to fill with JSON-serialisable values (versions, timings, counts).

Example (from a benchmark script run as ``python bench/some_bench.py``)::

    import numpy as np
    from anchors import mxnet_python, run_in_anchor

    if mxnet_python() is not None:
        run = run_in_anchor(
            "mxnet",
            "import mxnet as mx\\n"
            "outputs['y'] = mx.nd.relu(mx.nd.array(inputs['x']))\\n"
            "result['version'] = mx.__version__\\n",
            {"x": np.array([-1.0, 2.0], dtype=np.float32)},
        )
        run["y"]              # array([0., 2.], dtype=float32)
        run.json["version"]   # '1.9.1'

Snippets are code written by us in benchmarks and tests; never pass text from a job spec here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

ANCHORS_DIR = Path(__file__).resolve().parent / ".anchors"
KNOWN_ANCHORS = ("mxnet", "torch")

# Runs inside the anchor interpreter (which has its own numpy). Kept free of anything newer than
# Python 3.11 and numpy 1.23 so it works in both venvs.
_HARNESS = r"""
import json, sys
import numpy as np

workdir = sys.argv[1]
with np.load(workdir + "/inputs.npz", allow_pickle=False) as packed:
    inputs = {name: packed[name] for name in packed.files}
outputs = {}
result = {}
with open(workdir + "/snippet.py") as handle:
    source = handle.read()
namespace = {"inputs": inputs, "outputs": outputs, "result": result, "__name__": "__anchor__"}
# Compiled under its real file name so a traceback shows the failing snippet line.
exec(compile(source, workdir + "/snippet.py", "exec"), namespace)


def to_numpy(name, value):
    if hasattr(value, "asnumpy"):           # MXNet NDArray
        value = value.asnumpy()
    elif hasattr(value, "detach"):          # torch.Tensor
        value = value.detach().cpu().numpy()
    array = np.asarray(value)
    if array.dtype.hasobject:
        raise TypeError("output %r has dtype object; only plain numeric arrays travel" % name)
    return array


arrays = {str(name): to_numpy(name, value) for name, value in outputs.items()}
np.savez(workdir + "/outputs.npz", **arrays)
with open(workdir + "/result.json", "w") as handle:
    json.dump(result, handle)
"""


class AnchorError(RuntimeError):
    """The anchor subprocess failed; ``stderr`` holds its output (the snippet's traceback)."""

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message if not stderr else f"{message}\n{_tail(stderr)}")
        self.stderr = stderr


class AnchorTimeout(AnchorError):
    """The snippet ran past its timeout and was killed."""


class AnchorMissing(AnchorError):
    """The anchor venv has not been built (run ``bench/setup``)."""


@dataclass
class AnchorResult:
    """What a snippet sent back: ``arrays`` from ``outputs``, ``json`` from ``result``."""

    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    json: dict[str, object] = field(default_factory=dict)
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0  # wall time of the subprocess, interpreter start-up included

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]


def anchor_python(name: str) -> Path | None:
    """Interpreter of the anchor venv ``name`` ("mxnet" or "torch"), or None when not built.

    A venv counts as built only once `bench/setup` has passed its smoke test and written its
    ``.anchor-spec`` stamp, so a half-finished install is reported as absent.
    """
    if name not in KNOWN_ANCHORS:
        raise ValueError(f"unknown anchor {name!r}; expected one of {KNOWN_ANCHORS}")
    venv = ANCHORS_DIR / name
    python = venv / "bin" / "python"
    if not (venv / ".anchor-spec").is_file() or not python.exists():
        return None
    return python


def mxnet_python() -> Path | None:
    """Interpreter of the MXNet 1.9.1 anchor, or None when `bench/setup` has not built it."""
    return anchor_python("mxnet")


def torch_python() -> Path | None:
    """Interpreter of the PyTorch 2.13 anchor, or None when `bench/setup` has not built it."""
    return anchor_python("torch")


def run_in_anchor(
    name: str,
    code: str,
    arrays: Mapping[str, npt.ArrayLike] | None = None,
    *,
    timeout: float = 120.0,
    threads: int | None = 1,
) -> AnchorResult:
    """Run ``code`` in the anchor venv ``name`` with ``arrays`` as ``inputs``.

    ``threads`` caps OpenMP/BLAS threads (1 by default: the machines are small and shared, and
    one thread makes float results repeatable); pass None to leave the libraries' default.
    Raises AnchorMissing when the venv is absent, AnchorTimeout past ``timeout`` seconds, and
    AnchorError when the snippet raises.
    """
    python = anchor_python(name)
    if python is None:
        raise AnchorMissing(f"the {name} anchor is not built; run bench/setup --{name}-only")
    packed_inputs = {str(key): _plain_array(key, value) for key, value in (arrays or {}).items()}
    with tempfile.TemporaryDirectory(prefix=f"anchor-{name}-") as workdir:
        work = Path(workdir)
        np.savez(work / "inputs.npz", **packed_inputs)
        (work / "snippet.py").write_text(code)
        (work / "harness.py").write_text(_HARNESS)
        started = time.perf_counter()
        try:
            finished = subprocess.run(
                [str(python), str(work / "harness.py"), str(work)],
                cwd=work,  # so the repo's own `engine` package can never shadow the anchor's
                env=_anchor_env(threads),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as expired:
            raise AnchorTimeout(
                f"{name} snippet ran past {timeout:g}s and was killed", _text(expired.stderr)
            ) from None
        seconds = time.perf_counter() - started
        if finished.returncode != 0:
            raise AnchorError(
                f"{name} snippet failed with exit code {finished.returncode}", finished.stderr
            )
        with np.load(work / "outputs.npz", allow_pickle=False) as packed:
            outputs = {key: packed[key] for key in packed.files}
        result = json.loads((work / "result.json").read_text())
    return AnchorResult(outputs, result, finished.stdout, finished.stderr, seconds)


# Runs inside the anchor interpreter for an AnchorStepper: the snippet builds and warms a
# model and defines ``step()``; then each line "<n>" on stdin times n steps and answers one
# line "@@times [seconds, ...]" (lines without the marker are the snippet's own prints).
_STEPPER_HARNESS = r"""
import json, sys, time
import numpy as np

workdir = sys.argv[1]
with np.load(workdir + "/inputs.npz", allow_pickle=False) as packed:
    inputs = {name: packed[name] for name in packed.files}
result = {}
with open(workdir + "/snippet.py") as handle:
    source = handle.read()
namespace = {"inputs": inputs, "outputs": {}, "result": result, "__name__": "__anchor__"}
exec(compile(source, workdir + "/snippet.py", "exec"), namespace)
step = namespace["step"]
print("@@ready " + json.dumps(result), flush=True)
for line in sys.stdin:
    count = int(line)
    if count <= 0:
        break
    times = []
    for _ in range(count):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    print("@@times " + json.dumps(times), flush=True)
"""


def stepper_code(timing_snippet: str, module: str) -> str:
    """A timing snippet (build, warm up, ``times = []``, a timed loop) cut before its timed
    loop, for an :class:`AnchorStepper`; it reports ``module.__version__`` as its version."""
    return timing_snippet.split("times = []")[0] + f"result['version'] = {module}.__version__\n"


class AnchorStepper:
    """An anchor process that keeps a warm model and times ``steps(n)`` on request.

    Benchmarks that compare contenders on a shared machine step them in turn, a few steps
    each, many times over: a load phase of the machine (seconds to minutes) then hits all of
    them alike, which one process per contender per round cannot promise. ``code`` builds
    the model, warms it up and defines ``step()``; it may fill ``result`` (e.g. a version),
    available as ``.json`` once the process is ready. Use as a context manager.
    """

    def __init__(self, name: str, code: str, arrays: Mapping[str, npt.ArrayLike] | None = None,
                 *, threads: int | None = 1) -> None:
        python = anchor_python(name)
        if python is None:
            raise AnchorMissing(f"the {name} anchor is not built; run bench/setup --{name}-only")
        self.name = name
        self._dir = tempfile.TemporaryDirectory(prefix=f"anchor-{name}-")
        work = Path(self._dir.name)
        np.savez(work / "inputs.npz", **{str(k): _plain_array(k, v)
                                         for k, v in (arrays or {}).items()})
        (work / "snippet.py").write_text(code)
        (work / "harness.py").write_text(_STEPPER_HARNESS)
        self._stderr = open(work / "stderr.txt", "w+")  # noqa: SIM115 - closed in close()
        self._process = subprocess.Popen(
            [str(python), str(work / "harness.py"), str(work)], cwd=work,
            env=_anchor_env(threads), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._stderr, text=True, bufsize=1)
        self.json: dict[str, object] = json.loads(self._answer("@@ready "))

    def _answer(self, marker: str) -> str:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            if line.startswith(marker):
                return line[len(marker):]
        self._stderr.seek(0)
        raise AnchorError(f"{self.name} stepper exited with code {self._process.wait()}",
                          self._stderr.read())

    def steps(self, count: int) -> list[float]:
        """Seconds of each of ``count`` steps, timed in the anchor process."""
        assert self._process.stdin is not None
        self._process.stdin.write(f"{count}\n")
        self._process.stdin.flush()
        return [float(t) for t in json.loads(self._answer("@@times "))]

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                assert self._process.stdin is not None
                self._process.stdin.write("0\n")
                self._process.stdin.close()
                self._process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
        self._stderr.close()
        self._dir.cleanup()

    def __enter__(self) -> AnchorStepper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _plain_array(name: object, value: npt.ArrayLike) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.hasobject:
        raise TypeError(f"input {name!r} has dtype object; only plain numeric arrays travel")
    return array


def _anchor_env(threads: int | None) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        # Our venv's paths would leak the wrong numpy/engine into the anchor interpreter.
        if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
    }
    if threads is not None:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(threads)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONWARNINGS"] = env.get("PYTHONWARNINGS", "ignore::DeprecationWarning")
    return env


def _text(stream: str | bytes | None) -> str:
    if stream is None:
        return ""
    return stream.decode(errors="replace") if isinstance(stream, bytes) else stream


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


if __name__ == "__main__":
    # `python bench/anchors.py` tells which anchors are ready.
    for anchor in KNOWN_ANCHORS:
        print(f"{anchor}: {anchor_python(anchor) or 'absent (run bench/setup)'}")
    sys.exit(0)
