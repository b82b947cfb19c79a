"""Registries: one decorator spelling, and names resolve as MXNet's do."""

import pathlib
import re

import pytest

import engine
import engine as mx


def test_every_registry_is_filled_with_the_one_register_decorator():
    root = pathlib.Path(engine.__file__).parent
    other = re.compile(r"^@(\w+\.(register|alias)\b|alias\()", re.M)
    offenders = [f"{p.relative_to(root)}: {m.group(0)}" for p in root.rglob("*.py")
                 for m in other.finditer(p.read_text())]
    assert offenders == []


@pytest.mark.parametrize("name, expected", [
    ("zeros", "Zero"), ("zero", "Zero"), ("ones", "One"),
])
def test_initializer_aliases(name, expected):
    assert type(mx.initializer.create(name)).__name__ == expected


@pytest.mark.parametrize("name, expected", [
    ("acc", "Accuracy"), ("top_k_acc", "TopKAccuracy"), ("ce", "CrossEntropy"),
    ("nll-loss", "NegativeLogLikelihood"), ("pearsonr", "PearsonCorrelation"),
    ("composite", "CompositeEvalMetric"),
])
def test_metric_aliases(name, expected):
    extra = {"top_k": 2} if name == "top_k_acc" else {}
    assert type(mx.metric.create(name, **extra)).__name__ == expected


@pytest.mark.parametrize("name, expected", [
    ("l2", "L2Loss"), ("softmax_ce", "SoftmaxCrossEntropyLoss"), ("ctc", "CTCLoss"),
    ("triplet", "TripletLoss"), ("SigmoidBinaryCrossEntropyLoss", "SigmoidBinaryCrossEntropyLoss"),
])
def test_loss_aliases(name, expected):
    assert type(mx.gluon.loss.LOSSES.create(name)).__name__ == expected


def test_mxnet_alias_decorators_still_work_for_user_code():
    @mx.metric.alias("my_metric_alias_test")
    class MyMetricAliasTest(mx.metric.EvalMetric):
        def __init__(self):
            super().__init__("my_metric")

        def update(self, labels, preds):
            pass

    assert isinstance(mx.metric.create("my_metric_alias_test"), MyMetricAliasTest)
