"""The job spec's data transforms and normalize (issue 13): typed, checked at submit."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from core.jobspec import parse_spec

BASE: dict[str, Any] = {
    "name": "t", "model": [{"type": "Dense", "units": 10}],
    "loss": {"type": "softmax_cross_entropy"}, "optimizer": {"type": "sgd", "learning_rate": 0.1},
}


def _spec(data: dict[str, Any]) -> dict[str, Any]:
    return BASE | {"data": data}


def test_transforms_and_normalize_parse() -> None:
    spec = parse_spec(_spec({
        "train": {"builtin": "cifar10", "transforms": [
            {"type": "RandomResizedCrop", "size": 32, "scale": [0.5, 1.0]},
            {"type": "RandomFlipLeftRight"}, {"type": "RandomBrightness", "brightness": 0.2},
            {"type": "ToTensor"}, {"type": "Normalize", "mean": [0.5, 0.5, 0.5], "std": 0.25}]},
        "val": {"dataset": "00000000-0000-4000-8000-000000000000",
                "transforms": [{"type": "CenterCrop", "size": [28, 28]}]},
        "normalize": "auto",
    }))
    assert [t.type for t in spec.data.train.transforms or []] == [
        "RandomResizedCrop", "RandomFlipLeftRight", "RandomBrightness", "ToTensor", "Normalize"]
    assert spec.data.normalize == "auto"


@pytest.mark.parametrize(
    ("transform", "where"),
    [
        ({"type": "Resize", "size": 0}, "size"),
        ({"type": "Resize", "size": "big"}, "size"),
        ({"type": "RandomBrightness", "brightness": -1}, "brightness"),
        ({"type": "RandomBrightness", "brightness": True}, "brightness"),
        ({"type": "RandomResizedCrop", "size": 8, "scale": [0.9, 0.1]}, "scale"),
        ({"type": "Normalize", "std": 0}, "std"),
        ({"type": "Normalize", "std": [1.0, -1.0]}, "std"),
        ({"type": "ToTensor", "extra": 1}, "extra"),
        ({"type": "Rotate", "angle": 3}, "type"),
        ({"type": "Cast", "dtype": "object"}, "dtype"),
    ],
)
def test_a_bad_transform_is_refused_naming_it(transform: dict[str, Any], where: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_spec(_spec({"train": {"builtin": "mnist", "transforms": [transform]}}))
    assert where in str(caught.value)


def test_transforms_on_a_table_builtin_are_refused() -> None:
    with pytest.raises(ValidationError, match="transforms apply to image sets"):
        parse_spec(_spec({"train": {"builtin": "digits", "transforms": [{"type": "ToTensor"}]}}))


def test_normalize_accepts_only_auto() -> None:
    with pytest.raises(ValidationError, match="normalize"):
        parse_spec(_spec({"train": {"builtin": "mnist"}, "normalize": "yes"}))
