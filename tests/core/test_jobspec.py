from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from core import registry_names
from core.jobspec import JobSpec, parse_spec
from tests.api.specs import DIGITS_MLP


def _spec(**changes: Any) -> dict[str, Any]:
    spec = copy.deepcopy(DIGITS_MLP)
    spec.update(changes)
    return spec


def _fields(exc: pytest.ExceptionInfo[ValidationError]) -> list[tuple[Any, ...]]:
    return [tuple(e["loc"]) for e in exc.value.errors()]


def test_design_example_parses_and_round_trips() -> None:
    spec = parse_spec(_spec())
    assert spec.optimizer.type == "adam"
    assert spec.optimizer.params == {"learning_rate": 0.001, "wd": 0.0001, "clip_gradient": 5.0}
    assert spec.initial_learning_rate() == 0.001
    assert spec.queue(default="cpu") == "cpu"
    dumped = spec.model_dump(mode="json")
    assert parse_spec(dumped) == spec
    assert dumped["optimizer"] == DIGITS_MLP["optimizer"]


def test_every_registered_name_is_accepted() -> None:
    for layer in registry_names.LAYERS:
        params = {"Dense": {"units": 2}, "Dropout": {"rate": 0.5},
                  "Activation": {"activation": "tanh"}, "Conv2D": {"channels": 2, "kernel_size": 3},
                  "Embedding": {"input_dim": 5, "output_dim": 2}}.get(layer, {})
        parse_spec(_spec(model=[{"type": layer, **params}]))
    for name in registry_names.OPTIMIZERS:
        assert parse_spec(_spec(optimizer={"type": name})).optimizer.type == name
    for name in registry_names.LR_SCHEDULERS:
        parse_spec(_spec(lr_scheduler={"type": name}))
    for name in registry_names.LOSSES:
        parse_spec(_spec(loss={"type": name}))
    for name in registry_names.INITIALIZERS:
        parse_spec(_spec(initializer={"type": name}))
    parse_spec(_spec(metrics=list(registry_names.METRICS)))


def test_names_are_case_insensitive_like_the_registries() -> None:
    spec = parse_spec(_spec(optimizer={"type": "Adam"}, metrics=["Accuracy"]))
    assert spec.optimizer.type == "adam" and spec.metrics == ["accuracy"]


@pytest.mark.parametrize(
    ("change", "location"),
    [
        ({"unknown": 1}, ("unknown",)),
        ({"model": [{"type": "Dense", "units": 0}]}, ("model", 0, "Dense", "units")),
        ({"model": [{"type": "Dense"}]}, ("model", 0, "Dense", "units")),
        ({"model": [{"type": "GRU"}]}, ("model", 0)),
        ({"optimizer": {"type": "sgd", "momentum": {"nested": 1}}}, ("optimizer",)),
        ({"optimizer": {"type": "sgd", "learning_rate": True}}, ("optimizer",)),
        (
            {"data": {"train": {"dataset": "../../etc/passwd"}}},
            ("data", "train", "DatasetSource", "dataset"),
        ),
        ({"data": {"train": {"builtin": "digits"}, "batch_size": 0}}, ("data", "batch_size")),
        ({"checkpoint": {"every_steps": 0}}, ("checkpoint", "every_steps")),
        ({"trainer": {"kvstore": "dist_sync"}}, ("trainer", "kvstore")),
        ({"name": ""}, ("name",)),
        ({"model": [{"type": "Flatten"}] * 300}, ("model",)),
        ({"metrics": ["accuracy"] * 20}, ("metrics",)),
    ],
)
def test_invalid_specs_point_at_the_field(
    change: dict[str, Any], location: tuple[Any, ...]
) -> None:
    with pytest.raises(ValidationError) as exc:
        parse_spec(_spec(**change))
    assert location in _fields(exc)


def test_scheduler_base_lr_is_the_initial_lr_without_optimizer_lr() -> None:
    spec = parse_spec(_spec(optimizer={"type": "sgd"},
                            lr_scheduler={"type": "factor", "step": 10, "base_lr": 0.3}))
    assert spec.initial_learning_rate() == 0.3
    plain = parse_spec(_spec(optimizer={"type": "sgd"}, lr_scheduler=None))
    assert plain.initial_learning_rate() is None


def test_device_chooses_the_queue() -> None:
    assert parse_spec(_spec(device="gpu")).queue(default="cpu") == "gpu"
    assert parse_spec(_spec(device="auto")).queue(default="gpu") == "gpu"


def test_spec_is_immutable() -> None:
    spec = JobSpec.model_validate(_spec())
    with pytest.raises(ValidationError):
        spec.epochs = 3  # type: ignore[misc]
