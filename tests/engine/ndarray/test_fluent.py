"""Each fluent NDArray method computes what the ``nd`` operator of the same name computes,
with MXNet's keyword arguments."""

from __future__ import annotations

import numpy as np
import pytest

from engine import nd

_rng = np.random.default_rng(4)
DATA = _rng.uniform(0.1, 0.9, (5, 17, 1)).astype(np.float32)
WIDE = _rng.uniform(0.1, 0.9, (5, 17, 6)).astype(np.float32)
MAPS = _rng.uniform(0.1, 0.9, (5, 17, 2, 3)).astype(np.float32)
UNITS = _rng.uniform(0.1, 0.9, (2, 1, 3, 1, 4)).astype(np.float32)

CALLS = [
    (WIDE, "split", {"axis": 2, "num_outputs": 3}),
    (WIDE, "split_v2", {"axis": 2, "indices_or_sections": 3}),
    (WIDE, "split_v2", {"axis": 2, "indices_or_sections": (1, 3, 5)}),
    (WIDE, "slice", {"begin": (2, 5, 1), "end": (4, 7, 6)}),
    (DATA, "transpose", {"axes": (1, 0, 2)}),
    (DATA, "slice_axis", {"axis": 1, "begin": 5, "end": 7}),
    (DATA, "slice_like", {"axes": (0, -2), "shape_like": nd.zeros((3, 3))}),
    (DATA, "take", {"indices": nd.array([2, 3])}),
    (DATA, "pick", {"axis": 1, "index": nd.array([[2], [3], [5], [6], [11]])}),
    (DATA, "clip", {"a_min": 0.25, "a_max": 0.75}),
    (DATA, "broadcast_axes", {"axis": (2,), "size": (5,)}),
    (MAPS, "pad", {"mode": "constant", "pad_width": (0, 0, 0, 0, 3, 0, 0, 4)}),
    (MAPS, "reshape_like", {"rhs": nd.ones((30, 17))}),
    (DATA, "reshape", {"shape": (17, 1, 5)}),
    (DATA, "broadcast_to", {"shape": (5, 17, 47)}),
    (UNITS, "squeeze", {"axis": (1, 3)}),
    (DATA, "one_hot", {"depth": 15}),
    (DATA, "tile", {"reps": (1, 2)}),
    (DATA, "repeat", {"repeats": 3}),
    *[(DATA, name, {"axis": (1, 2)}) for name in
      ("sum", "nansum", "prod", "nanprod", "mean", "max", "min", "norm")],
    *[(DATA, name, {"axis": 1}) for name in
      ("expand_dims", "flip", "sort", "topk", "argsort", "argmax", "argmin")],
    *[(DATA, name, {}) for name in (
        "flatten", "norm", "round", "rint", "fix", "floor", "ceil", "trunc", "zeros_like",
        "ones_like", "abs", "sign", "sin", "cos", "degrees", "radians", "exp", "expm1",
        "square", "reciprocal", "argmax_channel", "shape_array", "size_array", "arcsin",
        "arccos", "arctan", "tan", "sinh", "cosh", "tanh", "arcsinh", "arctanh", "log",
        "log10", "log2", "log1p", "sqrt", "rsqrt", "cbrt", "rcbrt", "relu", "sigmoid",
        "softmax", "log_softmax", "softmin")],
    (DATA + 1, "arccosh", {}),
]


@pytest.mark.parametrize(("data", "name", "kwargs"), CALLS,
                         ids=[f"{c[1]}-{i}" for i, c in enumerate(CALLS)])
def test_fluent_method_equals_operator(data, name, kwargs) -> None:
    array = nd.array(data)
    regular = getattr(nd, name)(array, **kwargs)
    fluent = getattr(array, name)(**kwargs)
    if isinstance(regular, list):
        assert len(regular) == len(fluent)
        pairs = list(zip(regular, fluent, strict=True))
    else:
        pairs = [(regular, fluent)]
    for r, f in pairs:
        assert r.shape == f.shape
        np.testing.assert_allclose(r.asnumpy(), f.asnumpy(), rtol=1e-6)
