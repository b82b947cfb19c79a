"""The event mixins of the Estimator's handlers and MXNet 1.9's checks of handlers and
metrics (what :mod:`.estimator` and :mod:`.event_handler` both use).

>>> from engine import metric
>>> [m.name for m in check_metrics(metric.CompositeEvalMetric(['acc', 'mse']))]
['accuracy', 'mse']
"""

from __future__ import annotations

from typing import Any

from ... import metric as metric_mod


class EventHandler:
    """Base of all handlers; ``priority`` orders handlers of the same event."""


class TrainBegin(EventHandler):
    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        pass


class TrainEnd(EventHandler):
    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        pass


class EpochBegin(EventHandler):
    def epoch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        pass


class EpochEnd(EventHandler):
    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool | None:
        return False


class BatchBegin(EventHandler):
    def batch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        pass


class BatchEnd(EventHandler):
    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool | None:
        return False


def check_event_handlers(handlers: Any) -> list[Any]:
    """One handler or a list of them, as a new list; anything else is a ValueError."""
    if isinstance(handlers, EventHandler):
        return [handlers]
    handlers = list(handlers or [])
    if not all(isinstance(h, EventHandler) for h in handlers):
        raise ValueError(f"handlers must be an EventHandler or a list of EventHandler, got: "
                         f"{handlers}")
    return handlers


def check_metrics(metrics: Any) -> list[Any]:
    """A metric, a CompositeEvalMetric (its members) or a list of metrics, as a list."""
    if isinstance(metrics, metric_mod.CompositeEvalMetric):
        return [m for member in metrics.metrics for m in check_metrics(member)]
    if isinstance(metrics, metric_mod.EvalMetric):
        return [metrics]
    metrics = list(metrics or [])
    if not all(isinstance(m, metric_mod.EvalMetric) for m in metrics):
        raise ValueError(f"metrics must be a Metric or a list of Metric, refer to "
                         f"engine.metric.EvalMetric: {metrics}")
    return metrics


def check_handler_metric_ref(handler: Any, known_metrics: set[Any]) -> None:
    """Every metric a handler holds (an attribute named like ``*metric*``) must be one of the
    estimator's own; a ValueError names the handler otherwise. Methods are not metrics
    (MXNet looks at them too, which fails any handler with such a method)."""
    for attribute in dir(handler):
        if "metric" not in attribute:
            continue
        reference = getattr(handler, attribute)
        if not reference or callable(reference):
            continue
        for m in reference if isinstance(reference, list) else [reference]:
            if m not in known_metrics:
                raise ValueError(
                    f"Event handler {type(handler).__name__} refers to a metric instance {m} "
                    "outside of the known training and validation metrics. Please use the "
                    "metrics from estimator.train_metrics and estimator.val_metrics instead.")
