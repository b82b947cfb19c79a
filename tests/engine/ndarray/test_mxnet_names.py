# ruff: noqa: E501 - the oracle snippet keeps its conditions on one line
"""Every public operator/class/function MXNet 1.9.1 has in ``mx.nd``, ``mx.nd.random``,
``mx.random``, ``mx.init``, ``mx.optimizer``, ``mx.metric`` and ``mx.autograd`` exists in the
engine, except the documented out-of-scope names below (read from the oracle at test time).

Module re-exports (``np``, ``ctypes``, ``warnings`` ...) are not API and are not compared.
``mx.nd.contrib`` is not compared as a whole: the engine has its isinf/isfinite/isnan,
boolean_mask, index_copy, arange_like and div_sqrt_dim (detection boxes, quantisation,
DGL graph and fused-attention kernels are out of scope).
"""

from __future__ import annotations

import pytest

import engine as mx
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

NAMESPACES = ("nd", "nd.random", "random", "init", "optimizer", "metric", "autograd")

# name -> why the engine does not have it
OUT_OF_SCOPE = {
    # sparse storage: the engine stores every array densely
    "cast_storage": "sparse storage", "sparse": "sparse storage",
    # MXNet's C-API plumbing and generated-operator modules
    "Custom": "C++ custom-operator bridge (use autograd.Function)",
    "register": "C++ operator registration",
    "op": "generated C++ operator module", "gen_op": "generated module",
    "gen__internal": "generated module", "gen_contrib": "generated module",
    "gen_image": "generated module", "gen_linalg": "generated module",
    "gen_sparse": "generated module", "utils": "module of sparse/binary-format helpers",
    "get_indexing_dispatch_code": "C-API indexing internals",
    "get_oshape_of_gather_nd_op": "C-API indexing internals",
    "indexing_key_expand_implicit_axes": "C-API indexing internals",
    "load_frombuffer": "MXNet's binary NDArray format (the engine saves .npz, no pickle)",
    # image decoding needs OpenCV
    "image": "OpenCV image operators", "imdecode": "OpenCV image decoding",
    # owned by the other helpers of issue 10 (layers / conv), merged separately
    "CTCLoss": "layers helper (CTC)", "ctc_loss": "layers helper (CTC)",
    "GroupNorm": "layers helper (norms)", "InstanceNorm": "layers helper (norms)",
    "Deconvolution": "conv helper (transposed conv)",
}

SNIPPET = f"""
import types
for path in {NAMESPACES!r}:
    mod = mx
    for part in path.split('.'):
        mod = getattr(mod, part)
    names = []
    for n in dir(mod):
        value = getattr(mod, n)
        namespace = path == 'nd' and n in ('random', 'contrib', 'linalg', 'sparse', 'image', 'op', 'utils')
        if n.startswith('_') or isinstance(value, types.ModuleType) and not namespace:
            continue
        origin = getattr(value, '__module__', '') or ''
        if isinstance(value, types.ModuleType) or origin.startswith('mxnet') or origin == 'ndarray':
            names.append(n)
    result[path] = sorted(names)
"""


@pytest.fixture(scope="module")
def oracle():
    return run_mxnet(SNIPPET).json


@pytest.mark.parametrize("path", NAMESPACES)
def test_mxnet_public_names_exist(oracle, path: str) -> None:
    module = mx
    for part in path.split("."):
        module = getattr(module, part)
    c_api = {"check_call", "CFUNCTYPE", "MXCallbackList", "NDArrayHandle", "SymbolHandle",
             "Symbol", "get_symbol", "c_array", "c_array_buf", "c_handle_array", "Context",
             "Lock", "current_context", "string_types", "numeric_types", "integer_types",
             "is_np_array", "registry", "load", "ndarray"}
    missing = [n for n in oracle[path]
               if not hasattr(module, n) and n not in OUT_OF_SCOPE and n not in c_api]
    assert missing == []
