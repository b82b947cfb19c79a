from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from core import spec_params
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


def test_every_offered_name_is_accepted() -> None:
    for layer, params in {"Dense": {"units": 2}, "Dropout": {"rate": 0.5},
                          "Activation": {"activation": "tanh"},
                          "Conv2D": {"channels": 2, "kernel_size": 3},
                          "Embedding": {"input_dim": 5, "output_dim": 2}, "Flatten": {},
                          "MaxPool2D": {}, "AvgPool2D": {}, "GlobalAvgPool2D": {},
                          "BatchNorm": {}, "LayerNorm": {}, "LeakyReLU": {}}.items():
        parse_spec(_spec(model=[{"type": layer, **params}]))
    required = {"factor": {"step": 10}, "multifactor": {"step": [10, 20]},
                "poly": {"max_update": 100}, "cosine": {"max_update": 100},
                "constant": {"value": 0.5}, "top_k_accuracy": {"top_k": 3}}
    for name in spec_params.names("optimizer"):
        assert parse_spec(_spec(optimizer={"type": name})).optimizer.type == name
    for name in spec_params.names("lr_scheduler"):
        parse_spec(_spec(lr_scheduler={"type": name, **required.get(name, {})}))
    for name in spec_params.names("loss"):
        parse_spec(_spec(loss={"type": name}))
    for name in spec_params.names("initializer"):
        parse_spec(_spec(initializer={"type": name, **required.get(name, {})}))
    metrics = [n for n in spec_params.names("metric") if n not in required]
    parse_spec(_spec(metrics=[*metrics, {"type": "top_k_accuracy", "top_k": 3}]))


def test_names_are_case_insensitive_like_the_registries() -> None:
    spec = parse_spec(_spec(optimizer={"type": "Adam"}, metrics=["Accuracy"]))
    assert spec.optimizer.type == "adam" and spec.metrics == ["accuracy"]


@pytest.mark.parametrize(
    ("change", "location"),
    [
        ({"unknown": 1}, ("unknown",)),
        # "Layers" is the model form's tag (api.errors drops it: "model.0.units")
        ({"model": [{"type": "Dense", "units": 0}]}, ("model", "Layers", 0, "Dense", "units")),
        ({"model": [{"type": "Dense"}]}, ("model", "Layers", 0, "Dense", "units")),
        ({"model": [{"type": "GRU"}]}, ("model", "Layers", 0)),
        ({"model": [{"type": "Reshape", "shape": [-1, -1, 8]}]},
         ("model", "Layers", 0, "Reshape", "shape")),
        ({"model": {"zoo": "resnet19_v1"}}, ("model", "Zoo", "zoo")),
        ({"model": {"zoo": "vgg11", "thumbnail": True}}, ("model", "Zoo")),
        ({"model": {"zoo": "resnet18_v1", "classes": 0}}, ("model", "Zoo", "classes")),
        ({"model": {"zoo": "resnet18_v1", "pretrained": True}}, ("model", "Zoo", "pretrained")),
        ({"model": {"model": "../x"}}, ("model", "Uploaded", "model")),
        ({"model": {"layers": []}}, ("model",)),
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
        ({"model": [{"type": "Flatten"}] * 300}, ("model", "Layers")),
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


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # issue 9: per class, not per kind
        ({"optimizer": {"type": "adam", "momentum": 0.9}}, "adam takes no parameter momentum"),
        ({"loss": {"type": "l2", "sparse_label": True}}, "l2 takes no parameter sparse_label"),
        ({"optimizer": {"type": "sgd", "use_fused_step": True}}, "no parameter use_fused_step"),
        # issue 14: types and ranges per parameter
        ({"optimizer": {"type": "sgd", "momentum": "abc"}}, "momentum must be a number"),
        ({"loss": {"type": "softmax_cross_entropy", "axis": "x"}}, "axis must be an integer"),
        ({"lr_scheduler": {"type": "cosine", "max_update": "x"}},
         "max_update must be an integer"),
        ({"lr_scheduler": {"type": "cosine"}}, "cosine needs parameter max_update"),
        ({"optimizer": {"type": "adam", "epsilon": -1}}, "epsilon must be > 0"),
        ({"optimizer": {"type": "adam", "clip_gradient": True}},
         "clip_gradient must be a number, got True"),
        ({"optimizer": {"type": "sgd", "momentum": 1.5}}, "momentum must be < 1"),
        ({"initializer": {"type": "xavier", "rnd_type": "zipf"}}, "rnd_type must be one of"),
        ({"metrics": [{"type": "top_k_accuracy"}]}, "top_k_accuracy needs parameter top_k"),
    ],
)
def test_component_parameters_are_checked_per_class(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        parse_spec(_spec(**change))


def test_a_path_as_dataset_id_is_reported_as_not_a_dataset_id() -> None:
    with pytest.raises(ValidationError) as exc:
        parse_spec(_spec(data={"train": {"dataset": "../../../../etc/passwd"}}))
    [error] = exc.value.errors()  # one error, not "builtin: Field required (and 2 more)"
    assert "'../../../../etc/passwd' is not a dataset id" in error["msg"]


def test_a_data_source_with_neither_key_names_both_forms() -> None:
    with pytest.raises(ValidationError) as exc:
        parse_spec(_spec(data={"train": {"bucket": "x"}}))
    [error] = exc.value.errors()
    assert error["loc"] == ("data", "train") and "{dataset: id}" in error["msg"]


def test_the_three_model_forms_parse_and_round_trip() -> None:
    layers = [{"type": "Reshape", "shape": [-1, 1, 8, 8]}, {"type": "Conv2D", "channels": 4,
              "kernel_size": 3}, {"type": "GlobalMaxPool2D"}, {"type": "Dense", "units": 10}]
    zoo = {"zoo": "ResNet18_v1", "classes": 10, "thumbnail": True}
    uploaded = {"model": "12345678-1234-1234-1234-123456789012", "params": True}
    for model in (layers, zoo, uploaded):
        spec = parse_spec(_spec(model=model))
        assert parse_spec(spec.model_dump(mode="json")) == spec
    assert parse_spec(_spec(model=zoo)).model.zoo == "resnet18_v1"  # type: ignore[union-attr]
    spec = parse_spec(_spec(model=uploaded))
    assert spec.uploaded_model_id() == uploaded["model"]
    assert parse_spec(_spec(model=layers)).uploaded_model_id() is None
