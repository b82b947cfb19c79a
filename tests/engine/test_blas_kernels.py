"""The engine picks numpy's OpenBLAS kernels for the CPU (engine.blas_kernels)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine import blas_kernels
from engine.blas_kernels import AVX512, plan

ROOT = Path(__file__).resolve().parents[2]
AVX2 = {"avx", "avx2", "fma"}


@pytest.mark.parametrize(("environ", "flags", "expected"), [
    ({}, AVX2 | AVX512, None),  # nothing pinned: OpenBLAS detects the CPU
    ({"OPENBLAS_CORETYPE": "Haswell"}, AVX2 | AVX512, "SkylakeX"),
    ({"OPENBLAS_CORETYPE": "zen"}, AVX2 | AVX512, "SkylakeX"),  # names are case-blind
    ({"OPENBLAS_CORETYPE": "Prescott"}, AVX2, "Haswell"),
    ({"OPENBLAS_CORETYPE": "Haswell"}, AVX2, "Haswell"),  # as new as the CPU: kept
    ({"OPENBLAS_CORETYPE": "Cooperlake"}, AVX2 | AVX512, "Cooperlake"),  # newer pin: kept
    ({"OPENBLAS_CORETYPE": "SkylakeX"}, AVX2, "SkylakeX"),  # a pin is never downgraded
    ({"OPENBLAS_CORETYPE": "Haswell"}, set(), "Haswell"),  # flags unknown
    ({"OPENBLAS_CORETYPE": "Haswell", "RUDDER_BLAS_CORETYPE": "inherit"}, AVX2 | AVX512,
     "Haswell"),
    ({"RUDDER_BLAS_CORETYPE": "inherit"}, AVX2 | AVX512, None),
    ({"OPENBLAS_CORETYPE": "SkylakeX", "RUDDER_BLAS_CORETYPE": "Haswell"}, AVX2 | AVX512,
     "Haswell"),
])
def test_plan(environ: dict[str, str], flags: set[str], expected: str | None) -> None:
    chosen = plan(environ, flags)
    assert chosen.coretype == expected
    assert chosen.reason
    assert chosen.changes == (expected is not None and expected != environ.get(
        "OPENBLAS_CORETYPE"))


def test_apply_edits_the_given_environment_only_when_numpy_is_not_loaded() -> None:
    # this process has numpy loaded, so the plan is recorded but the variable is left alone
    env = {"OPENBLAS_CORETYPE": "Prescott"}
    chosen = blas_kernels.apply(env)
    assert env["OPENBLAS_CORETYPE"] == "Prescott"
    assert chosen.coretype == "Prescott"
    assert "numpy was already loaded" in chosen.reason or not chosen.changes


def _kernels_after(imports: str, **env: str) -> dict[str, str]:
    """Which OpenBLAS kernels a fresh interpreter runs after ``imports``."""
    code = (f"{imports}\nimport json, threadpoolctl, engine\n"
            "info = [i for i in threadpoolctl.threadpool_info() if i['internal_api'] == 'openblas']"
            "\nprint(json.dumps({'architecture': info[0]['architecture'],"
            " 'described': engine.blas_kernels.describe()}))")
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    environ.pop("RUDDER_BLAS_CORETYPE", None)
    environ.update(env)
    out = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _expected_after_haswell_pin() -> str:
    native = blas_kernels.native_coretype(blas_kernels.cpu_flags())
    return "SkylakeX" if native == "SkylakeX" else "Haswell"


def test_importing_the_engine_first_replaces_an_older_pin() -> None:
    got = _kernels_after("import engine", OPENBLAS_CORETYPE="Haswell")
    assert got["architecture"] == _expected_after_haswell_pin()
    assert "OpenBLAS kernels" in got["described"]


def test_inherit_keeps_the_pin() -> None:
    got = _kernels_after("import engine", OPENBLAS_CORETYPE="Haswell",
                         RUDDER_BLAS_CORETYPE="inherit")
    assert got["architecture"] == "Haswell"


def test_the_worker_imports_the_engine_before_numpy() -> None:
    # celery imports workers.celery_app, then workers.tasks: the engine must come before
    # anything (SQLAlchemy's dialects, core's repositories) that loads numpy
    got = _kernels_after("import workers.celery_app, workers.tasks", OPENBLAS_CORETYPE="Haswell")
    assert got["architecture"] == _expected_after_haswell_pin()
