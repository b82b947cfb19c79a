"""The metric base class, the registry and ``create`` (MXNet 1.9's ``mx.metric`` core).

Every metric keeps a *local* running sum (reset by ``reset_local()``, e.g. by a
``Speedometer`` every few batches) and a *global* one (reset only by ``reset()``), so
the epoch figure survives periodic logging.

Sums are accumulated on the arrays' own device: a batch's statistic stays a 0-d
numpy/cupy array until someone reads ``sum_metric`` or calls ``get()``, so updating a
metric never forces a device-to-host copy in the training loop.

>>> from engine import metric, nd
>>> acc = metric.create('acc')
>>> acc.update([nd.array([0, 1, 1])], [nd.array([[0.3, 0.7], [0, 1.], [0.4, 0.6]])])
>>> acc.get()
('accuracy', 0.6666666666666666)
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from ..backend import to_numpy
from ..registry import Registry
from .arrays import _as_list, check_label_shapes, host, raw

METRICS = Registry("metric")


def register(klass: Any = None, *, name: str | None = None, aliases: tuple[str, ...] = ()):
    """Register a metric class under its lower-cased class name (plus ``aliases``)."""
    return METRICS.register(klass, name=name, aliases=aliases)


def alias(*names: str) -> Callable[[Any], Any]:
    """Register a metric class under extra names (MXNet's ``@alias``)."""

    def add(cls: Any) -> Any:
        return METRICS.register(cls, name=cls.__name__, aliases=names)

    return add


# ----------------------------------------------------------------------- base class


class EvalMetric:
    """Base class of all metrics: local and global ``sum_metric`` / ``num_inst``.

    Subclasses implement ``update(labels, preds)``, adding to ``sum_metric``,
    ``num_inst`` and their ``global_*`` twins.

    >>> class Count(EvalMetric):
    ...     def update(self, labels, preds):
    ...         self.sum_metric += 1; self.num_inst += 1
    >>> m = Count('count'); m.update(None, None); m.get()
    ('count', 1.0)
    """

    def __init__(
        self,
        name: str,
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        self.name = str(name)
        self.output_names = output_names
        self.label_names = label_names
        self._has_global_stats = kwargs.pop("has_global_stats", False)
        self._kwargs = kwargs
        self.reset()

    # Sums may hold 0-d device arrays; reading them is where the host copy happens.
    @property
    def sum_metric(self) -> Any:
        return host(self._sum_metric)

    @sum_metric.setter
    def sum_metric(self, value: Any) -> None:
        self._sum_metric = value

    @property
    def global_sum_metric(self) -> Any:
        return host(self._global_sum_metric)

    @global_sum_metric.setter
    def global_sum_metric(self, value: Any) -> None:
        self._global_sum_metric = value

    @property
    def num_inst(self) -> Any:
        return host(self._num_inst)

    @num_inst.setter
    def num_inst(self, value: Any) -> None:
        self._num_inst = value

    @property
    def global_num_inst(self) -> Any:
        return host(self._global_num_inst)

    @global_num_inst.setter
    def global_num_inst(self, value: Any) -> None:
        self._global_num_inst = value

    def _add(self, value: Any, count: Any) -> None:
        """Add one batch's statistic to the local and global sums (no host copy)."""
        self._sum_metric = self._sum_metric + value
        self._global_sum_metric = self._global_sum_metric + value
        self._num_inst = self._num_inst + count
        self._global_num_inst = self._global_num_inst + count

    def __str__(self) -> str:
        return f"EvalMetric: {dict(self.get_name_value())}"

    def get_config(self) -> dict[str, Any]:
        """The constructor arguments; ``create(**config)`` rebuilds the metric."""
        config = self._kwargs.copy()
        config.update(
            {
                "metric": self.__class__.__name__,
                "name": self.name,
                "output_names": self.output_names,
                "label_names": self.label_names,
            }
        )
        return config

    def update_dict(self, label: dict[str, Any], pred: dict[str, Any]) -> None:
        """Update from name → array dicts, keeping only ``label_names``/``output_names``."""
        preds = (
            [pred[n] for n in self.output_names]
            if self.output_names is not None
            else list(pred.values())
        )
        labels = (
            [label[n] for n in self.label_names]
            if self.label_names is not None
            else list(label.values())
        )
        self.update(labels, preds)

    def update(self, labels: Any, preds: Any) -> None:
        raise NotImplementedError()

    def reset(self) -> None:
        """Clear the local and the global statistics."""
        self._num_inst = 0
        self._sum_metric = 0.0
        self._global_num_inst = 0
        self._global_sum_metric = 0.0

    def reset_local(self) -> None:
        """Clear only the local statistics (what ``Speedometer`` does after each log line)."""
        self._num_inst = 0
        self._sum_metric = 0.0

    def get(self) -> tuple[Any, Any]:
        """``(name, value)`` over the updates since the last reset/reset_local (NaN if none)."""
        num = self.num_inst
        if num == 0:
            return self.name, float("nan")
        return self.name, float(self.sum_metric / num)

    def get_global(self) -> tuple[Any, Any]:
        """``(name, value)`` since the last ``reset()``."""
        if not self._has_global_stats:
            return self.get()
        num = self.global_num_inst
        if num == 0:
            return self.name, float("nan")
        return self.name, float(self.global_sum_metric / num)

    def get_name_value(self) -> list[tuple[str, float]]:
        """``[(name, value), ...]`` of the local statistics."""
        return _zip_name_value(*self.get())

    def get_global_name_value(self) -> list[tuple[str, float]]:
        """``[(name, value), ...]`` of the global statistics."""
        if self._has_global_stats:
            return _zip_name_value(*self.get_global())
        return self.get_name_value()


def _zip_name_value(name: Any, value: Any) -> list[tuple[str, float]]:
    names = name if isinstance(name, list) else [name]
    values = value if isinstance(value, list) else [value]
    return list(zip(names, values, strict=True))


# ------------------------------------------------------------------------- create


def create(metric: Any, *args: Any, **kwargs: Any) -> EvalMetric:
    """A metric from a name, a config dict / JSON string, a callable or a list of those.

    Names are case-insensitive (``'acc'``, ``'ce'``, ``'nll_loss'``, ``'top_k_accuracy'``,
    ``'pearsonr'``, ``'mse'``, ...); a list gives a :class:`CompositeEvalMetric`, a
    plain function ``feval(label, pred)`` a :class:`CustomMetric`.

    >>> create(['acc', 'ce']).get()[0]
    ['accuracy', 'cross-entropy']
    >>> create('top_k_accuracy', top_k=3).name
    'top_k_accuracy_3'
    """
    if isinstance(metric, EvalMetric):
        if args or kwargs:
            raise ValueError("metric is already an instance; extra arguments are invalid")
        return metric
    if isinstance(metric, type) and issubclass(metric, EvalMetric):
        return metric(*args, **kwargs)
    if isinstance(metric, list):
        composite = CompositeEvalMetric()
        for child in metric:
            composite.add(create(child, *args, **kwargs))
        return composite
    if isinstance(metric, dict):
        return create(**{**metric, **kwargs})
    if callable(metric):
        return CustomMetric(metric, *args, **kwargs)
    if not isinstance(metric, str):
        raise TypeError(
            f"metric must be a name, a config, a callable, a list or an EvalMetric, "
            f"got {type(metric).__name__}"
        )
    text = metric.strip()
    if text.startswith("{") or text.startswith("["):
        if args or kwargs:
            raise ValueError("a JSON metric config takes no extra arguments")
        config = json.loads(text)
        if isinstance(config, list):  # MXNet's '["name", {kwargs}]' form
            name, params = config
            return create(name, **params)
        return create(**config)
    return METRICS.get(text)(*args, **kwargs)


# ----------------------------------------------------------- composite and custom


@register(aliases=("composite",))
class CompositeEvalMetric(EvalMetric):
    """Several metrics updated together; ``get()`` returns lists of names and values.

    >>> m = CompositeEvalMetric(['acc', 'mse'])
    >>> [type(x).__name__ for x in m.metrics]
    ['Accuracy', 'MSE']
    """

    def __init__(
        self,
        metrics: Sequence[Any] | None = None,
        name: str = "composite",
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(
            name, output_names=output_names, label_names=label_names, has_global_stats=True
        )
        self.metrics = [create(m) for m in (metrics or [])]

    def add(self, metric: Any) -> None:
        self.metrics.append(create(metric))

    def get_metric(self, index: int) -> EvalMetric:
        try:
            return self.metrics[index]
        except IndexError:
            raise ValueError(
                f"Metric index {index} is out of range 0 and {len(self.metrics)}"
            ) from None

    def update_dict(self, labels: dict[str, Any], preds: dict[str, Any]) -> None:
        if self.label_names is not None:
            labels = OrderedDict((k, v) for k, v in labels.items() if k in self.label_names)
        if self.output_names is not None:
            preds = OrderedDict((k, v) for k, v in preds.items() if k in self.output_names)
        for metric in self.metrics:
            metric.update_dict(labels, preds)

    def update(self, labels: Any, preds: Any) -> None:
        for metric in self.metrics:
            metric.update(labels, preds)

    def reset(self) -> None:
        for metric in getattr(self, "metrics", ()):
            metric.reset()

    def reset_local(self) -> None:
        for metric in self.metrics:
            metric.reset_local()

    def _collect(self, getter: str) -> tuple[list[str], list[float]]:
        names: list[str] = []
        values: list[float] = []
        for metric in self.metrics:
            name, value = getattr(metric, getter)()
            names.extend(name if isinstance(name, list) else [name])
            values.extend(value if isinstance(value, list) else [value])
        return names, values

    def get(self) -> tuple[list[str], list[float]]:  # type: ignore[override]
        return self._collect("get")

    def get_global(self) -> tuple[list[str], list[float]]:  # type: ignore[override]
        return self._collect("get_global")

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["metrics"] = [m.get_config() for m in self.metrics]
        return config


@register
class CustomMetric(EvalMetric):
    """A metric from ``feval(label, pred)`` on numpy arrays, returning a value per batch
    or a ``(sum_metric, num_inst)`` pair.

    >>> m = CustomMetric(lambda label, pred: (label == pred.argmax(1)).mean(), name='hit')
    >>> m.update([[1, 0]], [[[0.2, 0.8], [0.3, 0.7]]]); m.get()
    ('hit', 0.5)
    """

    def __init__(
        self,
        feval: Callable[[Any, Any], Any],
        name: str | None = None,
        allow_extra_outputs: bool = False,
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
    ) -> None:
        if name is None:
            name = getattr(feval, "__name__", "custom")
            if "<" in name:
                name = f"custom({name})"
        super().__init__(
            name,
            feval=feval,
            allow_extra_outputs=allow_extra_outputs,
            output_names=output_names,
            label_names=label_names,
            has_global_stats=True,
        )
        self._feval = feval
        self._allow_extra_outputs = allow_extra_outputs

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = _as_list(labels), _as_list(preds)
        if not self._allow_extra_outputs:
            check_label_shapes(labels, preds)
        for pred, label in zip(preds, labels, strict=False):
            result = self._feval(to_numpy(raw(label)), to_numpy(raw(pred)))
            if isinstance(result, tuple):
                self._add(result[0], result[1])
            else:
                self._add(result, 1)

    def get_config(self) -> dict[str, Any]:
        raise NotImplementedError("CustomMetric cannot be serialized")


def np(  # noqa: N802 - MXNet's name
    numpy_feval: Callable[[Any, Any], Any],
    name: str | None = None,
    allow_extra_outputs: bool = False,
) -> CustomMetric:
    """A :class:`CustomMetric` from a function of numpy ``(label, pred)`` returning a float.

    >>> m = np(lambda label, pred: float(abs(label - pred).mean()), name='l1')
    >>> m.update([[1.0, 2.0]], [[1.5, 2.0]]); m.get()
    ('l1', 0.25)
    """

    def feval(label: Any, pred: Any) -> Any:
        return numpy_feval(label, pred)

    feval.__name__ = getattr(numpy_feval, "__name__", "custom")
    return CustomMetric(feval, name, allow_extra_outputs)
