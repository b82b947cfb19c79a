"""core/spec_tables.json (what the api checks specs against) is what the engine takes.

The api may not import the engine, so it reads a checked-in table; these tests regenerate
that table from the engine's constructors and fail on any difference, and show that each
name and layer the spec offers is one the engine builds.
"""

from __future__ import annotations

import typing

import pytest
from pydantic import ValidationError

from core import jobspec, spec_params
from engine import initializer, lr_scheduler, metric, optimizer
from engine.gluon import loss, nn
from tests.api.specs import DIGITS_MLP
from workers import spec_tables

CREATE = {
    "optimizer": optimizer.create,
    "lr_scheduler": lr_scheduler.create,
    "loss": loss.create,
    "initializer": initializer.create,
    "metric": metric.create,
}
# A value for each required parameter (the tables mark them; they have no default).
REQUIRED_VALUES = {"value": 1.0, "step": 10, "max_update": 100}


def test_checked_in_table_equals_the_one_generated_from_the_engine() -> None:
    generated = spec_tables.render(spec_tables.build_tables())
    assert spec_params.TABLES_PATH.read_text() == generated, (
        "core/spec_tables.json is stale: run `python -m workers.spec_tables`"
    )


@pytest.mark.parametrize("kind", spec_params.KINDS)
def test_every_offered_name_is_built_by_the_engine_with_its_defaults(kind: str) -> None:
    for name in spec_params.names(kind):  # type: ignore[arg-type]
        params = spec_params.parameters(kind, name)  # type: ignore[arg-type]
        required = {p: REQUIRED_VALUES[p] for p, e in params.items() if e.get("required")}
        if kind == "lr_scheduler" and name == "multifactor":
            required = {"step": [10, 20]}
        defaults = {p: e["default"] for p, e in params.items() if "default" in e}
        if name == "top_k_accuracy":
            defaults["top_k"] = 3  # its default (1) is refused by the engine and the spec
        assert CREATE[kind](name, **required, **defaults) is not None, f"{kind} {name}"


def test_a_parameter_another_class_takes_is_refused_by_the_engine_and_the_spec() -> None:
    # The drift of issue 9: the old per-kind allow-list let both through to the worker.
    with pytest.raises(TypeError):
        optimizer.create("adam", momentum=0.9)
    with pytest.raises(TypeError):
        loss.create("l2", sparse_label=True)
    spec = dict(DIGITS_MLP, optimizer={"type": "adam", "momentum": 0.9})
    with pytest.raises(ValidationError, match="adam takes no parameter momentum"):
        jobspec.parse_spec(spec)
    spec = dict(DIGITS_MLP, loss={"type": "l2", "sparse_label": True})
    with pytest.raises(ValidationError, match="l2 takes no parameter sparse_label"):
        jobspec.parse_spec(spec)


def _layer_models() -> list[type[jobspec.StrictModel]]:
    union = typing.get_args(typing.get_args(jobspec.Layer)[0])
    return list(union)


@pytest.mark.parametrize("model", _layer_models(), ids=lambda m: m.__name__)
def test_every_layer_field_is_a_parameter_of_the_engine_layer(model: type) -> None:
    name = model.model_fields["type"].annotation.__args__[0]
    samples = {"units": 2, "rate": 0.5, "activation": "relu", "channels": 2, "kernel_size": 1,
               "input_dim": 3, "output_dim": 2, "shape": [0, -1]}
    fields = {f: samples.get(f, info.default) for f, info in model.model_fields.items()
              if f != "type"}
    spec_layer = model.model_validate({"type": name, **fields})
    assert nn.create(name, **spec_layer.model_dump(exclude={"type"})) is not None


def test_the_spec_literals_are_what_the_engine_and_the_loaders_take() -> None:
    """The few name lists the schema spells itself (activations, built-in data sets)."""
    from workers.build import builtin_arrays

    for activation in typing.get_args(jobspec.Activation):
        assert nn.create("Activation", activation=activation) is not None, activation
    assert set(typing.get_args(jobspec.BuiltinName)) == set(jobspec.BUILTIN_DATASETS)
    for name, features in jobspec.BUILTIN_DATASETS.items():
        data, _ = builtin_arrays(name, "train")
        assert data.shape[1] == features, name  # what the size estimate assumes
