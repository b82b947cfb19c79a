"""The MXNet/PyTorch oracles answer with the numbers those libraries really produce."""

from __future__ import annotations

import numpy as np
import pytest

from tests import oracle
from tests.oracle import AnchorError, run_mxnet, run_torch

RNG = np.random.default_rng(7)
WEIGHT = RNG.standard_normal((3, 4)).astype(np.float32)
GRADS = RNG.standard_normal((2, 3, 4)).astype(np.float32)  # one gradient per step
LR, BETA1, BETA2, EPS = 0.01, 0.9, 0.999, 1e-2  # a large eps makes where it is added visible


def adam_reference(weight, grads, *, eps_on_corrected_v: bool):
    """Adam in float64. MXNet adds eps to sqrt(v) and folds bias correction into the step size;
    PyTorch adds eps to sqrt(v_hat). The two differ noticeably once eps is not tiny."""
    w = weight.astype(np.float64)
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, g in enumerate(grads.astype(np.float64), start=1):
        m = BETA1 * m + (1 - BETA1) * g
        v = BETA2 * v + (1 - BETA2) * g * g
        if eps_on_corrected_v:
            w = w - LR * (m / (1 - BETA1**t)) / (np.sqrt(v / (1 - BETA2**t)) + EPS)
        else:
            step = LR * np.sqrt(1 - BETA2**t) / (1 - BETA1**t)
            w = w - step * m / (np.sqrt(v) + EPS)
    return w


def test_mxnet_adam_two_steps_match_mxnet_formula():
    run = run_mxnet(
        f"""
opt = mx.optimizer.Adam(learning_rate={LR}, beta1={BETA1}, beta2={BETA2}, epsilon={EPS})
update = mx.optimizer.get_updater(opt)
weight = nd.array(inputs["weight"])
for grad in inputs["grads"]:
    update(0, nd.array(grad), weight)
outputs["weight"] = weight
result["version"] = mx.__version__
""",
        {"weight": WEIGHT, "grads": GRADS},
    )
    assert run.json["version"] == "1.9.1"
    assert run["weight"].dtype == np.float32 and run["weight"].shape == WEIGHT.shape
    mxnet_formula = adam_reference(WEIGHT, GRADS, eps_on_corrected_v=False)
    np.testing.assert_allclose(run["weight"], mxnet_formula, rtol=1e-5, atol=1e-6)
    # The oracle tells the two conventions apart, so an engine using PyTorch's would be caught.
    torch_formula = adam_reference(WEIGHT, GRADS, eps_on_corrected_v=True)
    assert np.abs(run["weight"] - torch_formula).max() > 1e-4


def test_torch_adam_two_steps_match_torch_formula():
    run = run_torch(
        f"""
weight = torch.nn.Parameter(torch.from_numpy(inputs["weight"]))
opt = torch.optim.Adam([weight], lr={LR}, betas=({BETA1}, {BETA2}), eps={EPS})
for grad in inputs["grads"]:
    weight.grad = torch.from_numpy(grad)
    opt.step()
outputs["weight"] = weight
""",
        {"weight": WEIGHT, "grads": GRADS},
    )
    torch_formula = adam_reference(WEIGHT, GRADS, eps_on_corrected_v=True)
    np.testing.assert_allclose(run["weight"], torch_formula, rtol=1e-5, atol=1e-6)


def test_arrays_keep_dtype_shape_and_values_both_ways():
    inputs = {
        "half": np.array([[1.5, -2.25]], dtype=np.float16),
        "ints": np.arange(6, dtype=np.int64).reshape(2, 3),
        "scalar": np.array(3.0, dtype=np.float64),
        "empty": np.zeros((0, 5), dtype=np.float32),
    }
    run = run_mxnet(
        """
for name, value in inputs.items():
    outputs[name] = value                       # plain numpy arrays come back as they went
outputs["doubled"] = nd.array(inputs["ints"], dtype="int64") * 2   # NDArrays are converted
result["shapes"] = {name: list(value.shape) for name, value in inputs.items()}
""",
        inputs,
    )
    for name, value in inputs.items():
        assert run[name].dtype == value.dtype
        np.testing.assert_array_equal(run[name], value)
    np.testing.assert_array_equal(run["doubled"], inputs["ints"] * 2)
    assert run.json["shapes"] == {"half": [1, 2], "ints": [2, 3], "scalar": [], "empty": [0, 5]}


def test_snippet_error_reports_mxnet_traceback():
    with pytest.raises(AnchorError, match=r"(?s)snippet.py.*dot shape error: \[2,3\] X \[4,5\]"):
        run_mxnet("nd.dot(nd.ones((2, 3)), nd.ones((4, 5))).wait_to_read()")


def test_absent_venv_skips_with_reason(monkeypatch, tmp_path):
    monkeypatch.setattr(oracle.anchors, "ANCHORS_DIR", tmp_path)
    monkeypatch.delenv("RUDDER_REQUIRE_ORACLE", raising=False)
    with pytest.raises(pytest.skip.Exception, match="bench/setup"):
        run_mxnet("outputs['x'] = nd.ones(1)")


def test_absent_venv_fails_when_oracle_is_required(monkeypatch, tmp_path):
    monkeypatch.setattr(oracle.anchors, "ANCHORS_DIR", tmp_path)
    monkeypatch.setenv("RUDDER_REQUIRE_ORACLE", "1")
    with pytest.raises(pytest.fail.Exception, match="RUDDER_REQUIRE_ORACLE"):
        run_mxnet("outputs['x'] = nd.ones(1)")
