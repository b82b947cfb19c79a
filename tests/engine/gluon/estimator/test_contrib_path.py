"""The Estimator at MXNet 1.9's path ``gluon.contrib.estimator``: the same classes, a
replaceable BatchProcessor, and the error MXNet gives for a processor without its methods."""

import pytest

from engine import gluon
from engine.gluon.contrib import estimator as contrib_estimator
from tests.engine.gluon.estimator.test_estimator import _estimator, _loader
from tests.oracle import needs_mxnet, run_mxnet


def test_contrib_path_exports_every_estimator_name():
    for name in gluon.estimator.__all__:
        assert getattr(contrib_estimator, name) is getattr(gluon.estimator, name)


def test_a_custom_batch_processor_trains_every_batch_and_evaluates_every_val_batch():
    calls = []

    class Counting(contrib_estimator.BatchProcessor):
        def fit_batch(self, estimator, train_batch, batch_axis=0):
            calls.append("fit")
            return super().fit_batch(estimator, train_batch, batch_axis)

        def evaluate_batch(self, estimator, val_batch, batch_axis=0):
            calls.append("eval")
            return super().evaluate_batch(estimator, val_batch, batch_axis)

    est = _estimator(batch_processor=Counting())
    est.fit(_loader(), val_data=_loader(), epochs=1)
    weights = {k: p.data().asnumpy().copy() for k, p in est.net.collect_params().items()}
    assert calls == ["fit"] * 4 + ["eval"] * 4
    est.fit(_loader(), epochs=1)
    params = est.net.collect_params()
    assert any((p.data().asnumpy() != weights[k]).any() for k, p in params.items())


@needs_mxnet
def test_a_batch_processor_without_its_methods_is_a_value_error_as_in_mxnet():
    run = run_mxnet("""
from mxnet.gluon.contrib.estimator import Estimator
net = gluon.nn.Dense(2)
net.initialize()
try:
    Estimator(net, gluon.loss.L2Loss(), batch_processor=object())
except ValueError:
    result["error"] = "ValueError"
""")
    assert run.json["error"] == "ValueError"
    with pytest.raises(ValueError, match="fit_batch"):
        _estimator(batch_processor=object())
