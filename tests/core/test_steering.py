"""What the api checks before it accepts a step-boundary command, and what is in effect."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from core import commands as c
from core.jobspec import SchedulerSpec, parse_spec
from core.param_patterns import PatternError, matching
from core.rules import parse_rules
from core.steering import (
    VALIDATORS,
    AppliedCommand,
    CommandRefused,
    JobContext,
    hyperparameters_in_effect,
    validate,
)
from tests.api.specs import DIGITS_MLP

PARAMETERS = [{"name": f"dense{i}_{kind}", "shape": [2], "trainable": True}
              for i in range(2) for kind in ("weight", "bias")]


def _context(status: str = "running", **spec_changes: Any) -> JobContext:
    spec = copy.deepcopy(DIGITS_MLP)
    spec.update(spec_changes)
    return JobContext(spec=parse_spec(spec), status=status, lr_bounds=(1e-8, 10.0),
                      parameters=PARAMETERS, checkpoint_steps=(100, 200))


def _refused(command: c.StepCommand, context: JobContext) -> CommandRefused:
    with pytest.raises(CommandRefused) as refused:
        validate(command, context)
    return refused.value


def test_every_kind_has_a_validator() -> None:
    assert set(VALIDATORS) == c.COMMAND_TYPES


@pytest.mark.parametrize(("values", "field", "words"), [
    ({"momentum": 0.9}, "momentum", "adam has no parameter momentum"),
    ({"wd": -1.0}, "wd", ">= 0"),
    ({"beta1": 1.5}, "beta1", "< 1"),
    ({"epsilon": 0.0}, "epsilon", "> 0"),
    ({"rescale_grad": 2.0}, "rescale_grad", "the trainer sets it"),
    ({}, "body", "at least one of wd, beta1"),
])
def test_hyperparameters_are_checked_against_the_jobs_optimizer(
        values: dict[str, float], field: str, words: str) -> None:
    error = _refused(c.SetHyperparametersCommand(**values), _context())  # adam
    assert (error.field, error.status) == (field, 422)
    assert words in error.message


def test_sgd_takes_momentum_only_if_it_keeps_momentum_state() -> None:
    with_state = _context(optimizer={"type": "sgd", "learning_rate": 0.1, "momentum": 0.9})
    validate(c.SetHyperparametersCommand(momentum=0.5, wd=0.0, clip_gradient=0.0), with_state)
    without = _context(optimizer={"type": "sgd", "learning_rate": 0.1})
    error = _refused(c.SetHyperparametersCommand(momentum=0.5), without)
    assert error.field == "momentum" and "momentum 0" in error.message


def test_schedules_rules_and_evaluate_are_checked_against_the_spec() -> None:
    context = _context()
    validate(c.SetScheduleCommand(lr_scheduler=SchedulerSpec(type="cosine", max_update=50),
                                  learning_rate=0.01), context)
    error = _refused(c.SetScheduleCommand(
        lr_scheduler=SchedulerSpec(type="factor", step=5), learning_rate=20.0), context)
    assert error.field == "learning_rate"
    no_val = _context(data={"train": {"builtin": "digits"}})
    assert _refused(c.EvaluateCommand(), no_val).field == "type"
    rules = parse_rules([{"type": "early_stop", "metric": "val_accuracy"}])
    assert _refused(c.SetRulesCommand(rules=rules), no_val).field == "rules.0.metric"
    validate(c.SetRulesCommand(rules=rules), context)
    with pytest.raises(ValidationError):  # a scheduler's parameters are the spec's
        SchedulerSpec(type="cosine", max_update=-1)


def test_freeze_patterns_must_name_a_parameter_of_the_model() -> None:
    context = _context()
    validate(c.FreezeCommand(pattern="dense0_"), context)
    error = _refused(c.FreezeCommand(pattern="conv"), context)
    assert error.field == "pattern" and "dense0_bias" in error.message
    assert _refused(c.FreezeCommand(pattern="(unclosed"), context).field == "pattern"
    not_started = JobContext(spec=context.spec, status="queued", lr_bounds=(1e-8, 10.0))
    error = _refused(c.FreezeCommand(pattern="dense0_"), not_started)
    assert error.status == 409 and "first run" in error.message
    frozen = JobContext(spec=context.spec, status="running", lr_bounds=(1e-8, 10.0),
                        parameters=PARAMETERS, frozen=("dense0_weight",))
    assert "frozen" in _refused(c.UnfreezeCommand(pattern="dense1_"), frozen).message


def test_rollback_needs_a_kept_checkpoint_and_a_running_or_paused_job() -> None:
    validate(c.RollbackCommand(step=100), _context())
    error = _refused(c.RollbackCommand(step=150), _context())
    assert error.field == "step" and "kept: 100, 200" in error.message
    assert _refused(c.RollbackCommand(step=100), _context(status="queued")).status == 409


def test_stop_is_a_rules_command() -> None:
    assert _refused(c.StopCommand(), _context()).field == "type"
    validate(c.StopCommand(source="rule", rule="early_stop"), _context())


def test_patterns_are_regular_expressions_from_the_start_of_the_name() -> None:
    names = ["resnet_features_conv0", "resnet_output", "features_x"]
    assert matching("resnet.*features", names) == ["resnet_features_conv0"]
    with pytest.raises(PatternError, match="regular expression"):
        matching("[", names)
    with pytest.raises(PatternError):
        matching("a" * 300, names)


def test_what_is_in_effect_folds_the_applied_commands_over_the_spec() -> None:
    spec = _context().spec
    names = [p["name"] for p in PARAMETERS]
    applied = [
        AppliedCommand(11, c.SetHyperparametersCommand(wd=0.01)),
        AppliedCommand(20, c.FreezeCommand(pattern="dense")),
        AppliedCommand(30, c.UnfreezeCommand(pattern="dense1_")),
        AppliedCommand(40, c.SetScheduleCommand(
            lr_scheduler=SchedulerSpec(type="factor", step=10), learning_rate=0.5)),
        AppliedCommand(50, c.SetRulesCommand(rules=parse_rules([{"type": "guard"}]))),
    ]
    effect = hyperparameters_in_effect(spec, applied, names)
    assert effect["values"] == {"wd": 0.01, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8,
                                "clip_gradient": 5.0}
    assert effect["frozen"] == ["dense0_bias", "dense0_weight"]
    assert effect["schedule"] == {"type": "factor", "params": {"step": 10, "base_lr": 0.5},
                                  "from_step": 40}
    assert [r["type"] for r in effect["rules"]] == ["guard"]
    override = hyperparameters_in_effect(
        spec, [AppliedCommand(5, c.SetLRCommand(learning_rate=0.1, mode="override"))], names)
    assert override["schedule"] is None


def test_a_command_round_trips_through_its_stream_fields() -> None:
    sent = c.SetHyperparametersCommand(wd=1e-4, requested_by="u", checkpoint_before=True)
    again = c.parse_command(sent.type, sent.command_id, c.command_fields(sent))
    assert again == sent and again.values() == {"wd": 1e-4}
    assert c.parse_command("set_rules", "r", {"rules": [{"type": "guard"}]}).targets() == {
        "rules"}
    with pytest.raises(ValidationError):
        c.parse_command("set_hyperparameters", "x", {"wd": True})  # JSON true is not 1.0
