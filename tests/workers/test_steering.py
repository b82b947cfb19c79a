"""Step-boundary commands in the worker: (a) collect, (b) apply, rules, resume.

In-process (no service around the loop): the commands arrive through a scripted JobIO at
chosen steps, the way the control stream would deliver them.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core import commands as c
from core.commands import COMMAND_TYPES
from core.jobspec import SchedulerSpec
from core.rules import parse_rules
from core.storage import LocalStore
from tests.workers.jobs import ScriptedIO
from workers.checkpoints import latest_complete_checkpoint, load_checkpoint
from workers.runner import JobRunner, ReplayedCommand
from workers.steering.apply import APPLY
from workers.steering.collect import Collector
from workers.steering.rules import Observation, RuleBook

SPEC: dict[str, Any] = {
    "name": "steering",
    "model": [{"type": "Dense", "units": 16, "activation": "relu"},
              {"type": "Dense", "units": 10}],
    "data": {"train": {"builtin": "digits", "split": "train"},
             "val": {"builtin": "digits", "split": "val"}, "batch_size": 64},
    "loss": {"type": "softmax_cross_entropy"},
    "initializer": {"type": "xavier"},
    "optimizer": {"type": "adam", "learning_rate": 0.01},
    "lr_scheduler": {"type": "cosine", "max_update": 150, "final_lr": 0.0001},
    "epochs": 6,
    "checkpoint": {"every_steps": 20, "keep_last": 10},
    "seed": 5,
    "device": "cpu",
}


def _run(store: LocalStore, job_id: str, script: dict[int, list[c.Command]], *,
         crash_at: int | None = None, replay: list[ReplayedCommand] | None = None,
         spec: dict[str, Any] | None = None) -> tuple[JobRunner, ScriptedIO]:
    scripted = ScriptedIO(script, crash_at)
    runner = JobRunner(job_id, spec or SPEC, store, scripted, replay=replay)  # type: ignore[arg-type]
    scripted.runner = runner
    runner.run()
    return runner, scripted


def _files(store: LocalStore, job_id: str) -> tuple[bytes, bytes]:
    loaded = latest_complete_checkpoint(store, job_id)
    assert loaded is not None
    return loaded.params, loaded.trainer


def _params(npz: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(npz), allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def _script() -> dict[int, list[c.Command]]:
    return {
        25: [c.SetHyperparametersCommand(command_id="wd", wd=0.05, beta1=0.8)],
        33: [c.FreezeCommand(command_id="freeze", pattern="net_dense0_")],
        47: [c.SetScheduleCommand(command_id="schedule", learning_rate=0.02,
                                  lr_scheduler=SchedulerSpec(type="factor", step=7,
                                                             factor=0.7))],
        52: [c.EvaluateCommand(command_id="eval")],
        58: [c.UnfreezeCommand(command_id="unfreeze", pattern="net_dense0_w")],
        63: [c.SetLRCommand(command_id="lr", learning_rate=0.004, mode="scale")],
    }


def test_every_kind_has_an_apply_function() -> None:
    assert set(APPLY) == COMMAND_TYPES


def test_each_command_changes_the_trainer_from_its_step(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    runner, scripted = _run(store, "applied", _script())
    by_id = {o.command.command_id: o for o in scripted.outcomes}
    assert {k: (o.status, o.step) for k, o in by_id.items()} == {
        "wd": ("applied", 25), "freeze": ("applied", 33), "schedule": ("applied", 47),
        "eval": ("applied", 51), "unfreeze": ("applied", 58), "lr": ("applied", 63)}
    assert by_id["freeze"].result == {"frozen": ["net_dense0_bias", "net_dense0_weight"]}
    assert by_id["unfreeze"].result == {"unfrozen": ["net_dense0_weight"]}
    assert set(by_id["eval"].result["values"]) >= {"val_loss", "val_accuracy", "lr"}
    optimizer = runner.trainer.optimizer
    assert (optimizer.wd, optimizer.beta1) == (0.05, 0.8)
    assert runner.net.collect_params()["net_dense0_bias"].grad_req == "null"
    assert runner.net.collect_params()["net_dense0_weight"].grad_req == "write"
    # The replaced schedule counts from its own step 1 (the job's step 47): 0.02 for its
    # first 7 steps, x0.7 for the next 7.
    assert optimizer.lr_scheduler.offset == 46
    lr_at = {e.step: e.values["lr"] for e in scripted.events if e.type == "metric"}
    assert math.isclose(lr_at[50], 0.02) and math.isclose(lr_at[60], 0.02 * 0.7)
    # Frozen from step 33 to the end: dense0's bias did not move after that checkpoint.
    at_40 = _params(store.get("jobs/applied/checkpoints/0000000040/params.npz"))
    final = _params(_files(store, "applied")[0])
    # (save_parameters names them by position: "0.bias" is net_dense0_bias)
    assert np.array_equal(at_40["0.bias"], final["0.bias"])
    assert not np.array_equal(at_40["0.weight"], final["0.weight"])


def test_refusals_leave_the_trainer_as_it_was(tmp_path: Path) -> None:
    runner = JobRunner("refused", SPEC, LocalStore(tmp_path), ScriptedIO({}))  # type: ignore[arg-type]
    runner.build()
    before = runner.trainer.optimizer.hyperparameters()
    applied = runner.steering.apply([
        c.SetHyperparametersCommand(command_id="m", momentum=0.9),  # adam: no momentum
        c.FreezeCommand(command_id="f", pattern="conv"),
        c.UnfreezeCommand(command_id="u", pattern="net_"),  # nothing is frozen
        c.SetScheduleCommand(command_id="s", lr_scheduler=SchedulerSpec(
            type="multifactor", step=[10, 5])),  # the engine refuses what the spec allows
        c.PauseCommand(command_id="p"), c.SetLRCommand(command_id="after", learning_rate=1.0),
    ], step=7)
    assert [(o.command.command_id, o.status) for o in applied.outcomes] == [
        ("m", "rejected"), ("f", "rejected"), ("u", "rejected"), ("s", "rejected"),
        ("p", "applied")]
    assert all(o.reason for o in applied.outcomes[:4])
    assert applied.outcomes[4].step == 7  # a pause names the step the run stops at
    assert applied.ending is not None and [x.command_id for x in applied.left] == ["after"]
    assert runner.trainer.optimizer.hyperparameters() == before
    assert runner.steering.state.applied == ["p"]


def test_commands_sharing_a_boundary_are_carried_out_in_the_order_sent(
        tmp_path: Path) -> None:
    """A checkpoint sent before a freeze saves the state without it, and one sent after
    it saves the state with it, though all three arrive at the same boundary."""
    store = LocalStore(tmp_path / "store")
    _, scripted = _run(store, "ordered", {30: [
        c.CheckpointCommand(command_id="before"),
        c.FreezeCommand(command_id="freeze", pattern="net_dense0_"),
        c.EvaluateCommand(command_id="eval"),
        c.CheckpointCommand(command_id="after"),
    ]}, spec={**SPEC, "checkpoint": {"every_steps": 1000, "keep_last": 10}})
    by_id = {o.command.command_id: o for o in scripted.outcomes}
    assert [by_id[k].step for k in ("before", "freeze", "eval", "after")] == [29, 30, 29, 29]
    assert [o.command.command_id for o in scripted.outcomes][:4] == [
        "before", "freeze", "eval", "after"]
    saved = load_checkpoint(store, "ordered", 29)
    assert saved is not None and saved.meta.steering is not None
    # Both checkpoint commands wrote step 29; the second, taken after the freeze, is kept.
    assert saved.meta.steering["frozen"] == {"net_dense0_bias": "write",
                                             "net_dense0_weight": "write"}
    assert saved.meta.steering["applied"].index("before") < saved.meta.steering[
        "applied"].index("freeze")


def test_a_resumed_run_replays_commands_after_its_checkpoint_bit_identically(
        tmp_path: Path) -> None:
    """A run that dies at step 61 (its latest checkpoint: 60, before the lr change at 63
    and after the others) is resumed by a new runner that replays what it confirmed; it
    ends with the weights and optimizer state of a run that never stopped."""
    store = LocalStore(tmp_path / "store")
    _run(store, "uninterrupted", _script())
    _, crashed = _run(store, "crashed", _script(), crash_at=55)
    assert latest_complete_checkpoint(store, "crashed").meta.step == 40  # type: ignore[union-attr]
    confirmed = [ReplayedCommand(o.step, o.command) for o in crashed.outcomes
                 if o.status == "applied" and o.step is not None
                 and o.command.type in c.REPLAYED]
    # The resumed run gets the rest of the script from "the control stream".
    rest = {step: cmds for step, cmds in _script().items() if step > 55}
    _run(store, "crashed", rest, replay=confirmed)
    assert _files(store, "crashed") == _files(store, "uninterrupted")  # byte for byte


def test_a_collector_dedupes_and_lets_a_users_change_win_over_a_rules() -> None:
    collector = Collector(seen=["old"])
    user = c.SetLRCommand(command_id="u", learning_rate=0.1)
    rule = c.SetLRCommand(command_id="r", learning_rate=0.05, source="rule", rule="plateau")
    other = c.PauseCommand(command_id="g", source="rule", rule="guard")
    due, refused = collector.due([user, c.EvaluateCommand(command_id="old")], [rule, other],
                                 step=9)
    assert [x.command_id for x in due] == ["g", "u"]
    assert [(o.command.command_id, o.status) for o in refused] == [("r", "rejected")]
    assert "user's change of learning_rate at step 10 wins" in (refused[0].reason or "")
    assert collector.due([user], [], step=10) == ([], [])  # delivered twice: applied once


def _observe(book: RuleBook, values: list[float], metric: str = "val_loss",
             lr: float = 1.0) -> list[tuple[int, c.Command]]:
    fired = []
    for step, value in enumerate(values, start=1):
        for command in book.observe(Observation(step * 10, {metric: value}, lr, True)):
            fired.append((step, command))
            if isinstance(command, c.SetLRCommand):
                lr = command.learning_rate
    return fired


def test_reduce_on_plateau_follows_keras() -> None:
    rules = parse_rules([{"type": "reduce_on_plateau", "patience": 2, "factor": 0.5,
                          "cooldown": 1, "min_lr": 0.2, "min_delta": 0.01}])
    book = RuleBook("job", 0, rules)
    fired = _observe(book, [1.0, 0.9, 0.895, 0.9, 0.8, 0.85, 0.85, 0.85, 0.85, 0.85, 0.85])
    # 0.895 is no improvement (min_delta 0.01): waits 1, 2 -> fires at the 4th validation.
    # The 5th is the cooldown's (it improves anyway); 6, 7 wait and fire. The 8th is the
    # cooldown's last, and as in Keras the counting resumes in that same validation, so
    # the 9th fires, reaching min_lr; at the 11th lr is min_lr and nothing happens.
    assert [(step, cmd.learning_rate) for step, cmd in fired] == [(4, 0.5), (7, 0.25),
                                                                   (9, 0.2)]
    assert all(cmd.source == "rule" and cmd.rule == "reduce_on_plateau" for _, cmd in fired)
    again = RuleBook("job", 0, rules)  # the same observations, the same ids
    assert [c.command_id for _, c in _observe(again, [1.0, 0.9, 0.895, 0.9])] == [
        fired[0][1].command_id]
    assert RuleBook("job", 1, rules)._id(rules[0], 40) != fired[0][1].command_id  # a branch


def test_early_stop_and_the_guard_fire_on_crafted_sequences() -> None:
    stop = RuleBook("job", 0, parse_rules([{"type": "early_stop", "metric": "val_accuracy",
                                            "patience": 2, "min_delta": 0.001}]))
    fired = _observe(stop, [0.5, 0.6, 0.6005, 0.7, 0.69, 0.7], metric="val_accuracy")
    assert [(step, type(cmd).__name__) for step, cmd in fired] == [(6, "StopCommand")]
    assert "did not improve for 2 validations" in (fired[0][1].reason or "")
    guard = RuleBook("job", 0, parse_rules([{"type": "guard", "factor": 3,
                                             "within_steps": 25}]))
    # 2.0 -> 7.0 within 20 steps grows x3.5: pause; later a NaN pauses again.
    fired = _observe(guard, [2.0, 1.0, 2.5, 7.0, 1.0, 1.2, float("nan")], metric="train_loss")
    assert [step for step, _ in fired] == [4, 7]
    assert all(isinstance(cmd, c.PauseCommand) for _, cmd in fired)
    assert "grew from 1 to 7" in (fired[0][1].reason or "")
    assert "nan" in (fired[1][1].reason or "")
    slow = RuleBook("job", 0, parse_rules([{"type": "guard", "factor": 3, "within_steps": 5}]))
    assert _observe(slow, [1.0, 3.5], metric="train_loss") == []  # 10 steps apart: too slow


def test_rules_changed_while_running_keep_counters_only_when_unchanged() -> None:
    rules = parse_rules([{"type": "early_stop", "patience": 3},
                         {"type": "reduce_on_plateau", "patience": 3}])
    book = RuleBook("job", 0, rules)
    _observe(book, [1.0, 1.0, 1.0])
    assert book.states["early_stop"]["wait"] == 2
    book.replace(parse_rules([{"type": "early_stop", "patience": 3},
                              {"type": "reduce_on_plateau", "patience": 4}]))
    assert set(book.states) == {"early_stop"}


@pytest.mark.parametrize("rule", [
    {"type": "early_stop", "metric": "val_loss", "min_delta": 100.0},
    {"type": "guard", "metric": "train_loss", "factor": 1.0001, "within_steps": 10**6,
     "every_steps": 3},
])
def test_a_rule_that_fires_ends_or_pauses_the_run_and_is_audited(
        tmp_path: Path, rule: dict[str, Any]) -> None:
    spec = {**SPEC, "rules": [rule], "lr_scheduler": None,
            "optimizer": {"type": "sgd", "learning_rate": 5.0}}
    runner, scripted = _run(LocalStore(tmp_path), "ruled", {}, spec=spec)
    [fired] = [o for o in scripted.outcomes if o.command.source == "rule"]
    assert fired.status == "applied" and fired.command.rule == rule["type"]
    expected = {"early_stop": ("stop", STOP_REASONS["stop"]),
                "guard": ("pause", STOP_REASONS["pause"])}[rule["type"]]
    assert fired.command.type == expected[0]
    assert runner.state.stop_reason == expected[1]
    assert fired.step == runner.state.step


STOP_REASONS = {"stop": "stop", "pause": "pause"}


def test_an_lr_change_at_an_epochs_last_boundary_is_not_in_that_epochs_metrics(
        tmp_path: Path) -> None:
    # A change sent during an epoch's last step is applied at that step's boundary and
    # trains the steps after it; the epoch's metrics (labelled with its last step, published
    # right after that boundary) still show the lr that trained the epoch.
    spec = {k: v for k, v in SPEC.items() if k != "lr_scheduler"} | {"epochs": 2}
    store = LocalStore(tmp_path / "store")
    _, plain = _run(store, "plain", {}, spec=spec)
    def epoch_ends(events: list[Any]) -> list[Any]:  # the first epoch's end: its val_ metrics
        return [e for e in events if e.type == "metric" and e.epochs_done == 1
                and "val_loss" in e.values]

    [epoch_end] = epoch_ends(plain.events)
    last = epoch_end.step
    change = c.SetLRCommand(command_id="lr", learning_rate=0.004, mode="override")
    _, scripted = _run(store, "changed", {last + 1: [change]}, spec=spec)
    [outcome] = scripted.outcomes
    assert (outcome.status, outcome.step) == ("applied", last + 1)  # it trains from there
    ends = epoch_ends(scripted.events)
    assert [e.step for e in ends] == [last]
    assert math.isclose(ends[0].values["lr"], 0.01)
    later = [e for e in scripted.events if e.type == "metric" and e.step > last]
    assert later and all(math.isclose(e.values["lr"], 0.004) for e in later)


class _RecordingIO(ScriptedIO):
    """ScriptedIO that also keeps the metric points handed to the database."""

    def __init__(self) -> None:
        super().__init__({})
        self.points: list[tuple[int, int, dict[str, float]]] = []

    def record_metrics(self, step: int, epoch: int, values: dict[str, float]) -> None:
        self.points.append((step, epoch, dict(values)))


def test_throttled_metric_events_still_store_every_epoch_and_send_the_last(
        tmp_path: Path) -> None:
    # With a publish floor longer than the whole run, the live stream gets the first batch
    # event and the first epoch's end at once, the last epoch's end when training ends (not
    # an older held-back one), and the database gets every epoch's point all the same.
    from workers.hooks import Pacing

    spec = {k: v for k, v in SPEC.items() if k != "lr_scheduler"} | {"epochs": 3}
    recorded = _RecordingIO()
    runner = JobRunner("throttled", spec, LocalStore(tmp_path / "store"), recorded,  # type: ignore[arg-type]
                       pacing=Pacing(log_every=5, min_publish_interval=3600.0))
    recorded.runner = runner
    runner.run()
    per_epoch = runner.state.step // 3
    epoch_points = [p for p in recorded.points if "val_loss" in p[2]]
    assert [(step, epoch) for step, epoch, _ in epoch_points] == [
        (per_epoch * (i + 1), i) for i in range(3)]
    metric_events = [e for e in recorded.events if e.type == "metric"]
    assert [(e.step, e.epochs_done, "val_loss" in e.values) for e in metric_events] == [
        (5, 0, False), (per_epoch, 1, True), (3 * per_epoch, 3, True)]
    assert metric_events[-1].values == epoch_points[-1][2]
    assert all(math.isfinite(v) for _, _, values in recorded.points for v in values.values())
