"""The tour's `rudder pause` / `rudder resume` in a worker that has trained other jobs.

Seen on the tour: a job paused and resumed in the same worker process failed with
"parameter 0 (dense10_bias) has shape (10,) but the file has (512,)": the layers were
named from process-wide counters, and the trainer orders its states by sorted name.
"""

from __future__ import annotations

import io

import yaml

import engine
from tests.cli.conftest import ROOT
from workers import build


def _trainer_of(spec: dict) -> tuple[list[str], object]:
    net = build.build_network(list(spec["model"]))
    net.initialize(engine.init.Xavier())
    net(engine.nd.ones((1, 64)))
    trainer = build.build_trainer(spec, net)
    return [p.name for p in trainer._params], trainer


def test_a_resumed_job_loads_its_trainer_states_after_other_networks_were_built() -> None:
    spec = yaml.safe_load((ROOT / "examples" / "digits-mlp-steer.yaml").read_text())
    names, first = _trainer_of(spec)
    saved = io.BytesIO()
    first.save_states(saved)
    for _ in range(12):  # other jobs in the same worker process
        build.build_network(list(spec["model"]))
    again, resumed = _trainer_of(spec)
    assert again == names
    saved.seek(0)
    resumed.load_states(saved)  # raised ValueError (shape mismatch) before
