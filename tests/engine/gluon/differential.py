"""Run the same MXNet source in MXNet 1.9.1 (the oracle venv) and in Rudder, and compare.

A test module defines ``CASES`` (name -> snippet body that fills ``outputs`` with arrays and
``result`` with JSON values from ``inputs``) and ``INPUTS``. ``oracle_results`` runs every case
in one MXNet process; ``compare`` runs one case here with ``import engine as mx`` and checks
every array against MXNet's.
"""

from __future__ import annotations

import textwrap
from typing import Any

import numpy as np

import engine
from tests.oracle import run_mxnet


def _as_function(name: str, body: str) -> str:
    return f"def case_{name}(inputs, outputs, result):\n" + textwrap.indent(
        textwrap.dedent(body), "    ")


def oracle_results(cases: dict[str, str], inputs: dict[str, np.ndarray]) -> Any:
    """All cases' outputs from one MXNet run (arrays keyed ``case.name``, JSON per case)."""
    calls = []
    for name, body in cases.items():
        calls.append(_as_function(name, body))
        calls.append(
            f"_out, _res = {{}}, {{}}\ncase_{name}(inputs, _out, _res)\n"
            f"outputs.update({{'{name}.' + k: v for k, v in _out.items()}})\n"
            f"result['{name}'] = _res\n"
        )
    return run_mxnet("\n".join(calls), inputs, timeout=300)


def run_rudder(cases: dict[str, str], name: str, inputs: dict[str, np.ndarray]) -> Any:
    from engine import autograd, gluon, nd

    scope = {"mx": engine, "nd": nd, "autograd": autograd, "gluon": gluon, "np": np}
    exec(_as_function(name, cases[name]), scope)  # the test module's fixed source
    outputs: dict[str, Any] = {}
    result: dict[str, Any] = {}
    scope[f"case_{name}"]({k: v.copy() for k, v in inputs.items()}, outputs, result)
    return {k: np.asarray(v.asnumpy() if hasattr(v, "asnumpy") else v)
            for k, v in outputs.items()}, result


def compare(cases: dict[str, str], name: str, inputs: dict[str, np.ndarray], mxnet: Any,
            rtol: float = 1e-4, atol: float = 1e-5) -> tuple[Any, Any]:
    """Run case ``name`` here and assert every output array matches MXNet's."""
    ours, result = run_rudder(cases, name, inputs)
    theirs = {k.split(".", 1)[1]: v for k, v in mxnet.arrays.items()
              if k.startswith(name + ".")}
    assert theirs or mxnet.json[name], f"{name}: the MXNet case produced nothing"
    assert sorted(ours) == sorted(theirs)
    for key in sorted(theirs):
        assert ours[key].shape == theirs[key].shape, f"{name}: {key}"
        np.testing.assert_allclose(ours[key], theirs[key], rtol=rtol, atol=atol,
                                   err_msg=f"{name}: {key}")
    return result, mxnet.json[name]


# MXNet source for the cases: how a call failed, as a JSON value ("MXNetError" for any of
# MXNet's errors and the engine's subclasses of it, else the Python error's name)
ERROR_OF = """
def error_of(fn):
    try:
        fn()
    except Exception as err:
        return 'MXNetError' if isinstance(err, mx.base.MXNetError) else type(err).__name__
    return None
"""


def oracle_fixture(cases: dict[str, str], inputs: dict[str, np.ndarray]) -> Any:
    """A module-scoped fixture running all ``cases`` in MXNet once:
    ``mxnet = oracle_fixture(CASES, INPUTS)`` in a test module."""
    import pytest

    @pytest.fixture(scope="module")
    def mxnet() -> Any:
        return oracle_results(cases, inputs)

    return mxnet


def assert_same_results(cases: dict[str, str], name: str, inputs: dict[str, np.ndarray],
                        mxnet: Any, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    """``compare``, and every JSON value the case put in ``result`` equal to MXNet's."""
    ours, theirs = compare(cases, name, inputs, mxnet, rtol, atol)
    for key in theirs:
        assert ours[key] == theirs[key], f"{name}: {key}"
