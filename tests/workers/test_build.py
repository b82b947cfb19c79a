"""The worker builds a job from the validated JobSpec, so its defaults are the schema's.

Issue 9's drift: the runner re-read the raw dict with defaults of its own (batch_size 32
where the schema says 64; checkpoint every 0 steps where it says 200).
"""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import engine
from core.jobspec import CheckpointSpec, DataSpec, parse_spec
from workers import build
from workers.runner import JobRunner

ROOT = Path(__file__).resolve().parents[2]

MINIMAL: dict[str, Any] = {
    "name": "defaults",
    "model": [{"type": "Dense", "units": 10}],
    "data": {"train": {"builtin": "digits"}},
    "loss": {"type": "softmax_cross_entropy"},
    "optimizer": {"type": "sgd", "learning_rate": 0.1},
    "device": "cpu",
}


class _QuietIO:
    wake = threading.Event()

    def still_owner(self) -> bool:
        return True


def _runner(spec: dict[str, Any]) -> JobRunner:
    return JobRunner("build-test", spec, store=None, job_io=_QuietIO())  # type: ignore[arg-type]


def test_defaults_left_out_of_a_spec_are_the_schemas() -> None:
    runner = _runner(MINIMAL)
    runner.build()
    first_batch, _ = next(iter(runner.train_data))
    assert first_batch.shape[0] == DataSpec.model_fields["batch_size"].default == 64
    assert runner.checkpoint_every == CheckpointSpec.model_fields["every_steps"].default == 200
    assert runner.keep_last == 3 and runner.epochs == 1


def test_the_stored_spec_and_the_parsed_spec_build_the_same_job() -> None:
    stored = parse_spec(MINIMAL).model_dump(mode="json")
    assert _runner(stored).spec == _runner(MINIMAL).spec == parse_spec(MINIMAL)


def test_a_spec_the_schema_refuses_is_not_built() -> None:
    from workers.build import SpecError

    with pytest.raises(SpecError, match="optimizer: .*adam takes no parameter momentum"):
        _runner(dict(MINIMAL, optimizer={"type": "adam", "momentum": 0.9}))


def test_a_change_the_trainer_refuses_is_answered_with_a_rejected_lr_event() -> None:
    """Issue 15: a schedule still at lr 0 (warmup from 0) cannot be scaled; the worker
    says so as an lr event with status rejected and the engine's reason."""
    from core.commands import SetLRCommand
    from core.steering import outcome_event

    spec = dict(MINIMAL, lr_scheduler={"type": "cosine", "max_update": 100,
                                       "warmup_steps": 10, "warmup_begin_lr": 0.0})
    runner = JobRunner("lr-reject", spec, store=None, job_io=_QuietIO())  # type: ignore[arg-type]
    runner.build()
    applied = runner.steering.apply([
        SetLRCommand(command_id="c1", learning_rate=0.5, mode="scale"),
        SetLRCommand(command_id="c2", learning_rate=0.5, mode="override")], step=0)
    rejected, done = (outcome_event(o) for o in applied.outcomes)
    assert rejected.type == "lr" and rejected.status == "rejected"
    assert (rejected.change_id, rejected.learning_rate, rejected.applied_step) == ("c1", 0.5,
                                                                                   None)
    assert "0" in (rejected.reason or "")
    assert (done.status, done.change_id, done.reason) == ("applied", "c2", None)
    assert done.applied_step == 1 and done.learning_rate == 0.5


def _trainer_of(spec: Any) -> tuple[list[str], Any]:
    net = build.build_network(spec.model)
    net.initialize(engine.init.Xavier())
    net(engine.nd.ones((1, 64)))
    trainer = build.build_trainer(spec, net)
    return [p.name for p in trainer._params], trainer


def test_a_resumed_job_loads_its_trainer_states_after_other_networks_were_built() -> None:
    # Seen on the README tour: pause/resume in a worker that had trained other jobs failed
    # with "parameter 0 (dense10_bias) has shape (10,) but the file has (512,)": layer names
    # came from process-wide counters and the trainer orders its states by sorted name.
    raw = yaml.safe_load((ROOT / "examples" / "digits-mlp-steer.yaml").read_text())
    spec = parse_spec(raw)
    names, first = _trainer_of(spec)
    saved = io.BytesIO()
    first.save_states(saved)
    for _ in range(12):  # other jobs built in the same worker process
        build.build_network(spec.model)
    again, resumed = _trainer_of(spec)
    assert again == names
    resaved = io.BytesIO()
    resumed.save_states(resaved)
    assert resaved.getvalue() == saved.getvalue()  # the same job, the same file, byte for byte
    saved.seek(0)
    resumed.load_states(saved)  # raised ValueError (shape mismatch) before


def test_the_worker_trains_through_the_hybridized_program_bit_identical_to_imperative() -> None:
    spec = parse_spec({**MINIMAL, "model": [
        {"type": "Dense", "units": 16, "activation": "relu"},
        {"type": "Dropout", "rate": 0.1},
        {"type": "Dense", "units": 10},
    ]})
    x = engine.nd.random.uniform(shape=(8, 64))
    y = engine.nd.array([i % 10 for i in range(8)])
    loss_fn = engine.gluon.loss.SoftmaxCrossEntropyLoss()
    weights = []
    for hybrid in (True, False):
        engine.random.seed(7)
        net = build.build_network(spec.model)
        if not hybrid:
            net.hybridize(False)
        net.initialize(engine.init.Xavier())
        trainer = build.build_trainer(spec, net)
        for _ in range(3):
            with engine.autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(8)
        traced = net._cached_graph is not None and len(net._cached_graph.programs) > 0
        assert traced == hybrid
        weights.append([p.data().asnumpy() for p in net.collect_params().values()])
    for hybridized, imperative in zip(*weights, strict=True):
        np.testing.assert_array_equal(hybridized, imperative)


REQUIRED_SCHEDULE_PARAMS: dict[str, dict[str, Any]] = {
    "factor": {"step": 10, "factor": 0.5}, "multifactor": {"step": [10, 20]},
    "poly": {"max_update": 100}, "cosine": {"max_update": 100}}


@pytest.mark.parametrize("warmup", [{}, {"warmup_steps": 5},
                                    {"warmup_steps": 5, "warmup_begin_lr": 0.003}])
@pytest.mark.parametrize("schedule", sorted(REQUIRED_SCHEDULE_PARAMS))
def test_a_queued_jobs_lr_is_its_schedules_value_at_step_0(
        schedule: str, warmup: dict[str, Any]) -> None:
    """Issue 26: `rudder ls` shows the lr in effect, what the api records at submit
    (JobSpec.learning_rate_at_start, without the engine): it must be what the worker's
    trainer starts with, for every schedule the engine has."""
    from core import spec_params

    assert set(REQUIRED_SCHEDULE_PARAMS) == set(spec_params.names("lr_scheduler"))
    spec = parse_spec(dict(MINIMAL, lr_scheduler={
        "type": schedule, **REQUIRED_SCHEDULE_PARAMS[schedule], **warmup}))
    _, trainer = _trainer_of(spec)
    assert spec.learning_rate_at_start() == pytest.approx(trainer.learning_rate)
