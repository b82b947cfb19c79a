"""``nd.linalg`` against MXNet 1.9.1: values and gradients of each operator on a batch of
well-conditioned matrices."""

from __future__ import annotations

import numpy as np
import pytest

from engine import autograd, nd
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

_rng = np.random.default_rng(11)
_m = _rng.uniform(-1, 1, (2, 3, 3))
INPUTS = {
    "spd": (_m @ _m.transpose(0, 2, 1) + 3 * np.eye(3)).astype(np.float32),
    "a": _rng.uniform(-1, 1, (2, 3, 3)).astype(np.float32) + 2 * np.eye(3, dtype=np.float32),
    "b": _rng.uniform(-1, 1, (2, 3, 4)).astype(np.float32),
    "c": _rng.uniform(-1, 1, (2, 3, 4)).astype(np.float32),
    "v": _rng.uniform(0.5, 1.5, (2, 6)).astype(np.float32),
    "w": _rng.uniform(-1, 1, (2, 3, 5)).astype(np.float32),
}
CASES = {
    "gemm2": ("nd.linalg.gemm2(A, B, alpha=0.5)", ("a", "b")),
    "gemm2_t": ("nd.linalg_gemm2(A, B, transpose_a=True)", ("a", "b")),
    "gemm": ("nd.linalg.gemm(A, B, C, alpha=2.0, beta=0.5)", ("a", "b", "c")),
    "syrk": ("nd.linalg.syrk(B, alpha=0.3)", ("b",)),
    "syrk_t": ("nd.linalg.syrk(B, transpose=True)", ("b",)),
    "trmm": ("nd.linalg.trmm(A, B, alpha=2.0)", ("a", "b")),
    "trmm_upper_t": ("nd.linalg.trmm(A, B, transpose=True, lower=False)", ("a", "b")),
    "trsm": ("nd.linalg.trsm(A, B, alpha=0.5)", ("a", "b")),
    "trsm_right": ("nd.linalg.trsm(A, C.transpose((0, 2, 1)), rightside=True, lower=False)",
                   ("a", "c")),
    "potrf": ("nd.linalg.potrf(S)", ("spd",)),
    "potri": ("nd.linalg.potri(nd.linalg.potrf(S))", ("spd",)),
    "inverse": ("nd.linalg.inverse(A)", ("a",)),
    "det": ("nd.linalg.det(A)", ("a",)),
    "slogdet": ("nd.linalg.slogdet(A)[1]", ("a",)),
    "sumlogdiag": ("nd.linalg.sumlogdiag(S)", ("spd",)),
    "extractdiag": ("nd.linalg.extractdiag(A, offset=1)", ("a",)),
    "makediag": ("nd.linalg.makediag(V, offset=-1)", ("v",)),
    "extracttrian": ("nd.linalg.extracttrian(A, offset=0, lower=False)", ("a",)),
    "maketrian": ("nd.linalg.maketrian(V)", ("v",)),
    "maketrian_upper": ("nd.linalg.maketrian(V, lower=False)", ("v",)),
    "maketrian_offset": ("nd.linalg.maketrian(V, offset=1)", ("v",)),
    "extracttrian_offset": ("nd.linalg.extracttrian(A, offset=1)", ("a",)),
    "extracttrian_below": ("nd.linalg.extracttrian(A, offset=-1)", ("a",)),
    "gelqf_q": ("nd.linalg.gelqf(W.transpose((0, 1, 2)))[0]", ()),
    "gelqf_l": ("nd.linalg.gelqf(W.transpose((0, 1, 2)))[1]", ()),
}
NAMES = {"a": "A", "b": "B", "c": "C", "spd": "S", "v": "V", "w": "W"}

SNIPPET = f"""
cases = {CASES!r}
names = {NAMES!r}
for name, (expr, grads) in cases.items():
    arrays = {{names[k]: nd.array(v) for k, v in inputs.items()}}
    for key in grads:
        arrays[names[key]].attach_grad()
    with autograd.record():
        out = eval(expr, {{'nd': nd, **arrays}})
        loss = (out * out).sum()
    if grads:
        loss.backward()
    outputs[name] = out
    for key in grads:
        outputs[name + '_grad_' + key] = arrays[names[key]].grad
"""


@pytest.fixture(scope="module")
def oracle():
    return run_mxnet(SNIPPET, INPUTS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_linalg_matches_mxnet(oracle, name: str) -> None:
    expr, grads = CASES[name]
    arrays = {NAMES[k]: nd.array(v) for k, v in INPUTS.items()}
    for key in grads:
        arrays[NAMES[key]].attach_grad()
    with autograd.record():
        # the expressions are this module's constants, shared with the MXNet snippet
        out = eval(expr, {"nd": nd, **arrays})  # noqa: S307
        loss = (out * out).sum()
    if grads:
        loss.backward()
    np.testing.assert_allclose(out.asnumpy(), oracle[name], rtol=1e-4, atol=1e-5)
    for key in grads:
        np.testing.assert_allclose(arrays[NAMES[key]].grad.asnumpy(),
                                   oracle[f"{name}_grad_{key}"], rtol=1e-3, atol=1e-4,
                                   err_msg=f"{name} gradient of {key}")


@needs_mxnet
def test_syevd_matches_mxnet_vectors_values_signs_and_gradient() -> None:
    rng = np.random.default_rng(3)
    a = rng.normal(size=(2, 4, 4))
    a = (a + a.transpose(0, 2, 1)).astype(np.float32)
    gu = rng.normal(size=(2, 4, 4)).astype(np.float32)
    gl = rng.normal(size=(2, 4)).astype(np.float32)
    run = run_mxnet(
        "A = nd.array(inputs['a']); A.attach_grad()\n"
        "with autograd.record():\n"
        "    U, L = nd.linalg.syevd(A)\n"
        "    loss = (U * nd.array(inputs['gu'])).sum() + (L * nd.array(inputs['gl'])).sum()\n"
        "loss.backward()\n"
        "outputs['U'] = U; outputs['L'] = L; outputs['grad'] = A.grad\n",
        {"a": a, "gu": gu, "gl": gl})
    A = nd.array(a)
    A.attach_grad()
    with autograd.record():
        U, L = nd.linalg.syevd(A)
        loss = (U * nd.array(gu)).sum() + (L * nd.array(gl)).sum()
    loss.backward()
    np.testing.assert_allclose(U.asnumpy(), run["U"], atol=1e-5)
    np.testing.assert_allclose(L.asnumpy(), run["L"], atol=1e-5)
    np.testing.assert_allclose(A.grad.asnumpy(), run["grad"], atol=1e-5)
