"""GridGenerator, BilinearSampler and SpatialTransformer against MXNet 1.9.1: values and
gradients for data, grid and affine parameters (including samples outside the input)."""

from __future__ import annotations

import numpy as np
import pytest

from engine import autograd, nd
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

_rng = np.random.default_rng(9)
INPUTS = {
    "img": _rng.uniform(-1, 1, (2, 3, 5, 4)).astype(np.float32),
    "theta": np.array([[0.9, 0.2, 0.1, -0.1, 1.1, 0.05],
                       [1.2, -0.3, 0.3, 0.25, 0.8, -0.2]], np.float32),
    "grid": _rng.uniform(-1.2, 1.2, (2, 2, 3, 6)).astype(np.float32),
    "flow": _rng.uniform(-1.5, 1.5, (2, 2, 5, 4)).astype(np.float32),
    "head": _rng.uniform(-1, 1, (2, 3, 3, 6)).astype(np.float32),
    "img2": _rng.uniform(-1, 1, (2, 3, 5, 4)).astype(np.float32),
    "rois": np.array([[0, 0, 0, 3, 4], [1, 1.5, 0.5, 2.5, 3.6], [0, 2, 2, 9, 9],
                      [1, 0, 0, 0.4, 0.4]], np.float32),
}
CASES = {
    "affine_grid": ("nd.GridGenerator(T, transform_type='affine', target_shape=(3, 6))", "T"),
    "warp_grid": ("nd.GridGenerator(F, transform_type='warp')", "F"),
    "sampler": ("nd.BilinearSampler(D, G)", "DG"),
    "roi_pooling": ("nd.ROIPooling(D, R, pooled_size=(2, 2), spatial_scale=1.0)", "D"),
    "roi_pooling_scaled": ("nd.ROIPooling(D, R, pooled_size=(3, 2), spatial_scale=0.5)", "D"),
    "correlation": ("nd.Correlation(D, E, kernel_size=1, max_displacement=2, stride1=1, "
                    "stride2=1, pad_size=2)", "DE"),
    "correlation_k3": ("nd.Correlation(D, E, kernel_size=3, max_displacement=2, stride1=2, "
                       "stride2=2, pad_size=3)", "DE"),
    "correlation_abs": ("nd.Correlation(D, E, kernel_size=1, max_displacement=1, "
                        "is_multiply=False)", "DE"),
    "transformer": ("nd.SpatialTransformer(D, T, target_shape=(3, 6), transform_type='affine', "
                    "sampler_type='bilinear')", "DT"),
}
NAMES = {"D": "img", "T": "theta", "G": "grid", "F": "flow", "R": "rois", "E": "img2"}

SNIPPET = f"""
for name, (expr, wrt) in {CASES!r}.items():
    arrays = {{k: nd.array(inputs[v]) for k, v in {NAMES!r}.items()}}
    for k in wrt:
        arrays[k].attach_grad()
    with autograd.record():
        out = eval(expr, {{'nd': nd, **arrays}})
        loss = (out * out).sum()
    loss.backward()
    outputs[name] = out
    for k in wrt:
        outputs[name + '_d' + k] = arrays[k].grad
"""


@pytest.fixture(scope="module")
def oracle():
    return run_mxnet(SNIPPET, INPUTS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_sampler_matches_mxnet(oracle, name: str) -> None:
    expr, wrt = CASES[name]
    arrays = {k: nd.array(INPUTS[v]) for k, v in NAMES.items()}
    for k in wrt:
        arrays[k].attach_grad()
    with autograd.record():
        # the expressions are this module's constants, shared with the MXNet snippet
        out = eval(expr, {"nd": nd, **arrays})  # noqa: S307
        loss = (out * out).sum()
    loss.backward()
    np.testing.assert_allclose(out.asnumpy(), oracle[name], rtol=1e-4, atol=1e-5)
    for k in wrt:
        np.testing.assert_allclose(arrays[k].grad.asnumpy(), oracle[f"{name}_d{k}"],
                                   rtol=1e-3, atol=1e-4, err_msg=f"{name} d{k}")
