"""MXNet 1.9.1's public names exist in the engine, namespace by namespace (issue 10).

The list is read from the oracle venv at test time (never copied into the repository), so a
name MXNet has and the engine lacks fails here unless it is on the short, reasoned
out-of-scope list below. "Public" means: not underscored, and defined by MXNet itself (a
class, a function, or an MXNet submodule) rather than a helper MXNet happened to import
(ctypes, json, numpy, ...).
"""

from __future__ import annotations

import importlib
from functools import cache

import pytest

from tests.oracle import needs_mxnet, run_mxnet

NAMESPACES = [
    "nd", "nd.random", "nd.linalg", "sym", "random", "autograd", "init", "optimizer", "metric",
    "lr_scheduler", "gluon.nn", "gluon.loss", "gluon.rnn", "gluon.contrib.nn",
    "gluon.contrib.estimator", "gluon.contrib.estimator.estimator",
    "gluon.contrib.estimator.event_handler", "gluon.contrib.estimator.batch_processor",
    "gluon.data", "gluon.model_zoo", "gluon.model_zoo.vision",
    "recordio", "gluon.data.vision", "gluon.data.vision.transforms", "gluon.data.vision.datasets",
]
NAMESPACES += ["np", "np.random", "np.linalg", "npx", "npx.random", "image", "io"]  # issue 27

SPARSE = "sparse storage (CSR/row_sparse): the engine stores every array densely"
C_API = "MXNet's C++ operator plumbing (generated modules, registration, indexing internals)"
IMPORTED = "a module or function MXNet's namespace happens to import, not API of its own"
RECORDIO = "MXNet's C++ image operators (nd.image, nd.imdecode): engine.image does that work"
ROTATION = "image rotation (mx.image.imrotate) is not implemented"
DOWNLOAD = "Rudder never downloads data sets: the vision datasets read local files only"
NUMPY_FRONT = "MXNet's numpy front end (mx.np / mx.npx) is engine.np / engine.npx at the top level"
DETECTION = "object detection (SSD's multibox operators, box-aware augmenters and iterators)"
NP_LAYOUT = "mx.np's internal file layout: the functions are at mx.np's top level, as here"
GENERATED = ("gen_op", "gen__internal", "gen_contrib", "gen_image", "gen_linalg", "gen_sparse")
OUT_OF_SCOPE: dict[str, dict[str, str]] = {
    "nd": {
        "get_indexing_dispatch_code": C_API, "get_oshape_of_gather_nd_op": C_API,
        "indexing_key_expand_implicit_axes": C_API, "op": C_API, "register": C_API,
        "utils": SPARSE, "image": RECORDIO, "imdecode": RECORDIO,
        "sparse": SPARSE, **dict.fromkeys(GENERATED, C_API),
    },
    "sym": {
        "contrib": "contrib operators (detection, quantization, graph sampling)",
        "image": RECORDIO, "np": NUMPY_FRONT, "npx": NUMPY_FRONT, "numpy": NUMPY_FRONT,
        "numpy_extension": NUMPY_FRONT, "register": C_API,
        "sparse": SPARSE, **dict.fromkeys(GENERATED, C_API),
    },
    "autograd": {"Symbol": IMPORTED},
    "init": {"load": IMPORTED},
    "gluon.contrib.nn": {"SparseEmbedding": SPARSE},
    "gluon.contrib.estimator": {"utils": IMPORTED},
    "gluon.contrib.estimator.estimator": dict.fromkeys(
        ("Trainer", "gluon_loss", "metric_loss", "split_and_load"), IMPORTED),
    "gluon.contrib.estimator.event_handler": dict.fromkeys(
        ("CompositeEvalMetric", "EvalMetric", "metric_loss"), IMPORTED),
    "gluon.data.vision.transforms": {
        "HybridBlock": IMPORTED, "HybridSequential": IMPORTED,
        "Rotate": ROTATION, "RandomRotation": ROTATION,
    },
    "gluon.data.vision.datasets": {"check_sha1": DOWNLOAD, "download": DOWNLOAD},
    "np": dict.fromkeys(("arrayprint", "fallback", "fallback_linalg", "function_base", "io",
                         "multiarray", "stride_tricks", "utils"), NP_LAYOUT),
    "npx": dict.fromkeys(("multibox_detection", "multibox_prior", "multibox_target"), DETECTION),
    "image": {
        **dict.fromkeys(("CreateDetAugmenter", "CreateMultiRandCropAugmenter", "DetAugmenter",
                         "DetBorrowAug", "DetHorizontalFlipAug", "DetRandomCropAug",
                         "DetRandomPadAug", "DetRandomSelectAug", "ImageDetIter", "det",
                         "detection"), DETECTION),
        "imrotate": ROTATION, "random_rotate": ROTATION,
    },
    "io": {"ImageDetRecordIter": DETECTION, "LibSVMIter": SPARSE, "MXDataIter": C_API,
           "ImageRecordInt8Iter": "int8 (quantized) image batches: quantization is not "
                                  "implemented"},
}

LIST_PUBLIC = """
import types
import mxnet.gluon.contrib.estimator
mod = mx
for part in NAMESPACE.split('.'):
    mod = getattr(mod, part)
internal = ('mxnet.base', 'mxnet.util', 'mxnet.context')  # ctypes plumbing, imported helpers
names = []
for name in dir(mod):
    if name.startswith('_'):
        continue
    obj = getattr(mod, name)
    if isinstance(obj, types.ModuleType):
        if obj.__name__.startswith(mod.__name__ + '.'):
            names.append(name)
        continue
    defined_in = str(getattr(obj, '__module__', '') or '')
    if callable(obj) and defined_in.startswith('mxnet') and defined_in not in internal:
        names.append(name)
result['names'] = sorted(names)
"""


@cache
def mxnet_public_names(namespace: str) -> tuple[str, ...]:
    run = run_mxnet(f"NAMESPACE = {namespace!r}\n" + LIST_PUBLIC)
    return tuple(run.json["names"])


def engine_namespace(namespace: str) -> object:
    obj: object = importlib.import_module("engine")
    for part in namespace.split("."):
        obj = getattr(obj, part)
    return obj


@needs_mxnet
@pytest.mark.parametrize("namespace", NAMESPACES)
def test_every_public_mxnet_name_exists(namespace: str) -> None:
    ours = engine_namespace(namespace)
    skipped = OUT_OF_SCOPE.get(namespace, {})
    missing = [n for n in mxnet_public_names(namespace)
               if n not in skipped and not hasattr(ours, n)]
    assert not missing, f"mx.{namespace} lacks {len(missing)} of MXNet's names: {missing}"


@needs_mxnet
@pytest.mark.parametrize("namespace", sorted(OUT_OF_SCOPE))
def test_out_of_scope_list_names_real_mxnet_names(namespace: str) -> None:
    # A stale entry would hide nothing today but would silently excuse a future name.
    stale = set(OUT_OF_SCOPE[namespace]) - set(mxnet_public_names(namespace))
    assert not stale, f"out-of-scope entries MXNet does not have in mx.{namespace}: {stale}"
