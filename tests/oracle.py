"""MXNet 1.9.1 (and PyTorch) as test oracles, run in the venvs that `bench/setup` builds.

Tests import the helpers directly; nothing here needs tests/conftest.py::

    import numpy as np
    from tests.oracle import run_mxnet

    def test_relu_matches_mxnet():
        x = np.array([-1.0, 2.0], dtype=np.float32)
        run = run_mxnet("outputs['y'] = nd.relu(nd.array(inputs['x']))", {"x": x})
        np.testing.assert_allclose(my_relu(x), run["y"])

The snippet sees ``inputs`` (dict of numpy arrays), fills ``outputs`` (arrays, NDArrays or
tensors) and ``result`` (JSON values), and already has ``mx``, ``nd``, ``autograd``, ``gluon``
and ``np`` imported. Arrays travel through .npz files (no pickle). When the venv is absent the
test is skipped with the reason below; set RUDDER_REQUIRE_ORACLE=1 (e.g. in a CI job that built
the venv) to turn that skip into a failure so a broken build cannot hide behind skips.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType

import numpy.typing as npt
import pytest

_REPO = Path(__file__).resolve().parent.parent


def _load_anchors() -> ModuleType:
    # bench/ is a folder of scripts, not a package: load its helper module by path.
    name = "rudder_bench_anchors"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _REPO / "bench" / "anchors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


anchors = _load_anchors()
AnchorError = anchors.AnchorError
AnchorResult = anchors.AnchorResult

MXNET_ABSENT_REASON = "MXNet 1.9.1 oracle not built (bench/.anchors/mxnet); run bench/setup"
TORCH_ABSENT_REASON = "PyTorch oracle not built (bench/.anchors/torch); run bench/setup"

MXNET_PRELUDE = (
    "import numpy as np\nimport mxnet as mx\nfrom mxnet import autograd, gluon, nd\n"
)
TORCH_PRELUDE = "import numpy as np\nimport torch\n"


def mxnet_available() -> bool:
    """True when bench/setup has built the MXNet anchor venv."""
    return anchors.mxnet_python() is not None


def torch_available() -> bool:
    """True when bench/setup has built the PyTorch anchor venv."""
    return anchors.torch_python() is not None


def _must_have_oracles() -> bool:
    return os.environ.get("RUDDER_REQUIRE_ORACLE", "") not in ("", "0")


# Module-level marks for tests that only make sense with the oracle present.
needs_mxnet = pytest.mark.skipif(
    not mxnet_available() and not _must_have_oracles(), reason=MXNET_ABSENT_REASON
)
needs_torch = pytest.mark.skipif(
    not torch_available() and not _must_have_oracles(), reason=TORCH_ABSENT_REASON
)


def _skip_or_fail(reason: str) -> None:
    if _must_have_oracles():
        pytest.fail(f"{reason} (RUDDER_REQUIRE_ORACLE is set)")
    pytest.skip(reason)


def run_mxnet(
    code: str,
    inputs: Mapping[str, npt.ArrayLike] | None = None,
    *,
    timeout: float = 120.0,
) -> AnchorResult:
    """Run an MXNet snippet in the MXNet 1.9.1 venv; skip the calling test when it is absent.

    Returns an AnchorResult: ``run["name"]`` (or ``run.arrays``) for arrays the snippet put in
    ``outputs``, ``run.json`` for what it put in ``result``. A snippet that raises makes
    AnchorError, whose message carries the MXNet traceback.
    """
    if not mxnet_available():
        _skip_or_fail(MXNET_ABSENT_REASON)
    return anchors.run_in_anchor("mxnet", MXNET_PRELUDE + code, inputs, timeout=timeout)


def run_torch(
    code: str,
    inputs: Mapping[str, npt.ArrayLike] | None = None,
    *,
    timeout: float = 120.0,
) -> AnchorResult:
    """Like run_mxnet, in the PyTorch 2.13 (CPU) venv, with ``torch`` and ``np`` imported."""
    if not torch_available():
        _skip_or_fail(TORCH_ABSENT_REASON)
    return anchors.run_in_anchor("torch", TORCH_PRELUDE + code, inputs, timeout=timeout)


@pytest.fixture
def mxnet_oracle() -> Callable[..., AnchorResult]:
    """Fixture form of run_mxnet, for tests that prefer ``def test_x(mxnet_oracle)``.

    Bring it into a test module with ``from tests.oracle import mxnet_oracle  # noqa: F401``.
    """
    return run_mxnet
