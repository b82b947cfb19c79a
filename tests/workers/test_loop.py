"""workers.loop trains exactly as the engine's Estimator.fit does (same math, same order)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

import engine
from core.events import JobEvent
from tests.workers.jobs import idle_steering
from workers.hooks import LoopState, Pacing, ServiceHandler
from workers.loop import run_epochs
from workers.runner import JobRunner

SPEC: dict[str, Any] = {
    "name": "loop-test",
    "model": [{"type": "Dense", "units": 16, "activation": "relu"},
              {"type": "Dropout", "rate": 0.3}, {"type": "Dense", "units": 10}],
    "data": {"train": {"builtin": "digits", "split": "train"},
             "val": {"builtin": "digits", "split": "val"}, "batch_size": 50, "shuffle": True},
    "loss": {"type": "softmax_cross_entropy"},
    "initializer": {"type": "xavier"},
    "optimizer": {"type": "adam", "learning_rate": 0.01},
    "epochs": 3,
    "metrics": ["accuracy"],
    "seed": 11,
    "device": "cpu",
}


class _LocalIO:
    """A JobIO that keeps what the loop says in memory (no service around it)."""

    def __init__(self) -> None:
        self.wake = threading.Event()
        self.events: list[tuple[str, dict[str, Any]]] = []

    def still_owner(self) -> bool:
        return True

    def publish(self, event: JobEvent) -> None:
        self.events.append((event.type, event.data()))

    def record_metrics(self, *_: Any) -> None: ...
    def record_progress(self, *_: Any) -> None: ...

    def poll_commands(self) -> list[Any]:
        return []


def _built() -> JobRunner:
    from core.jobspec import parse_spec

    spec = parse_spec(SPEC).model_dump(mode="json")
    runner = JobRunner("loop-test", spec, store=None, job_io=_LocalIO())  # type: ignore[arg-type]
    runner.build()
    return runner


def _params(runner: JobRunner) -> dict[str, np.ndarray]:
    return {name: p.data().asnumpy() for name, p in runner.net.collect_params().items()}


def test_loop_matches_the_estimator_bit_for_bit() -> None:
    by_estimator = _built()
    engine.gluon.estimator.Estimator(
        by_estimator.net, by_estimator.loss, train_metrics=by_estimator.train_metrics,
        val_metrics=by_estimator.val_metrics, trainer=by_estimator.trainer,
        context=by_estimator.ctx,
    ).fit(by_estimator.train_data, val_data=by_estimator.val_data, epochs=3)

    by_loop = _built()
    io = _LocalIO()
    state = LoopState()
    handler = ServiceHandler(io, state, steering=idle_steering(),
                             save_checkpoint=lambda r, wait=False: True,
                             current_lr=lambda: 0.01, checkpoint_every=0,
                             pacing=Pacing(log_every=5))
    run_epochs(net=by_loop.net, loss_fn=by_loop.loss, trainer=by_loop.trainer,
               train_data=by_loop.train_data, val_data=by_loop.val_data,
               train_metrics=by_loop.train_metrics, val_metrics=by_loop.val_metrics,
               epochs=3, begin_epoch=0, begin_batch=0, handler=handler)

    expected, got = _params(by_estimator), _params(by_loop)
    assert [n.split("_", 1)[1] for n in expected] == [n.split("_", 1)[1] for n in got]
    for (name, want), have in zip(expected.items(), got.values(), strict=True):
        assert np.array_equal(want, have), name
    steps_per_epoch = len(by_loop.train_data)
    assert (state.step, state.epoch) == (3 * steps_per_epoch, 3)
    epoch_events = [data for kind, data in io.events
                    if kind == "metric" and "val_accuracy" in data["values"]]
    assert [e["epoch"] for e in epoch_events] == [0, 1, 2]
    estimator_val = by_estimator.val_metrics[0].get()[1]
    assert epoch_events[-1]["values"]["val_accuracy"] == estimator_val
