"""engine.examples: the digits example reaches its advertised accuracy on every path."""

from __future__ import annotations

import subprocess
import sys

from engine.examples import digits


def test_digits_mlp_and_convnet_reach_95_percent_through_module_and_estimator():
    results = digits.run(seed=0, verbose=False)
    assert set(results) == {"mlp / Module.fit", "mlp / Estimator", "convnet / Module.fit",
                            "convnet / Estimator"}
    for name, accuracy in results.items():
        assert accuracy >= 0.95, (name, accuracy)


def test_digits_split_is_fixed_and_disjoint():
    x_train, y_train, x_val, y_val = digits.load_split(0)
    again = digits.load_split(0)
    assert (x_train.shape, x_val.shape) == ((1438, 1, 8, 8), (359, 1, 8, 8))
    assert (again[3] == y_val).all()
    assert 0.0 <= x_train.min() and x_train.max() <= 1.0


def test_digits_runs_as_a_module_command():
    done = subprocess.run([sys.executable, "-m", "engine.examples.digits", "--help"],
                          capture_output=True, text=True, timeout=60, check=True)
    assert "digits" in done.stdout
