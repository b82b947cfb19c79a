"""The service's training loop: the engine's forward / backward / step, plus our hooks.

It does what ``engine.gluon.estimator.Estimator.fit`` does with its default handlers —
per batch: forward and loss under ``autograd.record``, backward, ``trainer.step``, the
training metrics, then the service hook; per epoch: validation, then the epoch-end hook —
written out flat. The estimator's generality (handler lists sorted by priority, keyword
dispatch, splitting batches over contexts) cost a few percent of a sub-millisecond step
in bench/service_loop.py, and the service's target is the bare loop's speed.

The hooks are :class:`workers.hooks.ServiceHandler`'s, called with a small view that has
the estimator's ``train_metrics`` / ``val_metrics`` attributes, in the estimator's order
(``batch_end`` after the step and the metric updates, ``epoch_end`` after validation,
``train_end`` when the loop ends or a hook stops it).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import engine
from workers.hooks import ServiceHandler


@dataclass(frozen=True)
class LoopView:
    """What the hooks read from the loop (the estimator's attribute names)."""

    train_metrics: list[Any]
    val_metrics: list[Any]


def _with_kinds(metrics: list[Any]) -> list[tuple[Any, bool]]:
    """Each metric with whether it takes the loss (a Loss metric) or (label, pred)."""
    return [(m, isinstance(m, engine.metric.Loss)) for m in metrics]


def evaluate(net: Any, loss_fn: Any, data: Any, metrics: list[tuple[Any, bool]]) -> None:
    """Reset ``metrics`` and update them over ``data`` in inference mode."""
    for metric, _ in metrics:
        metric.reset()
    with engine.autograd.predict_mode():
        for batch, label in data:
            pred = net(batch)
            loss = loss_fn(pred, label)
            for metric, takes_loss in metrics:
                if takes_loss:
                    metric.update(0, [loss])
                else:
                    metric.update([label], [pred])


def run_epochs(
    *,
    net: Any,
    loss_fn: Any,
    trainer: Any,
    train_data: Any,
    val_data: Any | None,
    train_metrics: list[Any],
    val_metrics: list[Any],
    epochs: int,
    begin_epoch: int,
    begin_batch: int,
    handler: ServiceHandler,
    step_size: Callable[[int], int] | None = None,
) -> None:
    """Train from ``(begin_epoch, begin_batch)`` to the end of epoch ``epochs - 1``, or
    until a hook returns True. The loader's order is a function of (seed, epoch), so the
    ``begin_batch`` batches already trained are skipped without being computed.
    ``step_size(i)`` is the batch size the update of the epoch's batch ``i`` normalises
    by (a distributed rank's batch is part of a global one); by default the batch's own."""
    view = LoopView(train_metrics, val_metrics)
    train_kinds, val_kinds = _with_kinds(train_metrics), _with_kinds(val_metrics)
    autograd = engine.autograd
    handler.train_begin(view)
    skip = begin_batch
    for epoch in range(begin_epoch, epochs):
        for metric, _ in train_kinds:
            metric.reset()
        if hasattr(train_data, "set_epoch"):
            train_data.set_epoch(epoch)
        if skip and hasattr(train_data, "iter_from"):  # skips without reading (shards.py)
            batches = train_data.iter_from(skip)
        else:
            batches = itertools.islice(iter(train_data), skip, None) if skip else \
                iter(train_data)
        for index, (data, label) in enumerate(batches, start=skip):
            with autograd.record():
                pred = net(data)
                loss = loss_fn(pred, label)
            loss.backward()
            trainer.step(data.shape[0] if step_size is None else step_size(index))
            for metric, takes_loss in train_kinds:
                if takes_loss:
                    metric.update(0, [loss])
                else:
                    metric.update([label], [pred])
            if handler.batch_end(view):
                handler.train_end(view)
                return
        skip = 0
        if val_data is not None:
            evaluate(net, loss_fn, val_data, val_kinds)
        if handler.epoch_end(view):
            break
    handler.train_end(view)
