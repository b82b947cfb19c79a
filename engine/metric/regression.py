"""Regression metrics: MAE, MSE, RMSE and PearsonCorrelation (MXNet 1.9 numerics).

MXNet 1.x averages per *batch*: each update adds the batch mean and counts one, and RMSE
is the mean of per-batch RMSEs (2.x counts samples instead).

>>> from engine import metric, nd
>>> pred = nd.array([[1, 2, 3, 4]]); label = pred + 0.1
>>> m = metric.create('mse'); m.update(label, pred); round(m.get()[1], 6)
0.01
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy

from ..backend import array_module, to_numpy
from .arrays import check_label_shapes, same_device
from .base import EvalMetric, register


class _PerBatchError(EvalMetric):
    """A per-batch error statistic; subclasses give ``_batch_value(diff, xp)``."""

    def __init__(self, name: str, output_names: Any, label_names: Any) -> None:
        super().__init__(
            name, output_names=output_names, label_names=label_names, has_global_stats=True
        )

    @staticmethod
    def _batch_value(diff: Any, xp: Any) -> Any:
        raise NotImplementedError

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, wrap=True)
        for label, pred in zip(labels, preds, strict=True):
            lab, prd = same_device(label, pred)
            # A 1-D array is a column, so (n,) labels broadcast against (n, 1) predictions.
            if lab.ndim == 1:
                lab = lab.reshape(lab.shape[0], 1)
            if prd.ndim == 1:
                prd = prd.reshape(prd.shape[0], 1)
            self._add(self._batch_value(lab - prd, array_module(prd)), 1)


@register
class MAE(_PerBatchError):
    """Mean absolute error, averaged over batches.

    >>> from engine import nd
    >>> m = MAE(); m.update([nd.array([[2.5], [0.0], [2], [8]])],
    ...                     [nd.array([[3], [-0.5], [2], [7]])]); m.get()
    ('mae', 0.5)
    """

    def __init__(
        self,
        name: str = "mae",
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(name, output_names, label_names)

    @staticmethod
    def _batch_value(diff: Any, xp: Any) -> Any:
        return xp.abs(diff).mean()


@register
class MSE(_PerBatchError):
    """Mean squared error, averaged over batches."""

    def __init__(
        self,
        name: str = "mse",
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(name, output_names, label_names)

    @staticmethod
    def _batch_value(diff: Any, xp: Any) -> Any:
        return (diff * diff).mean()


@register
class RMSE(_PerBatchError):
    """Root mean squared error of each batch, averaged over batches (MXNet 1.x)."""

    def __init__(
        self,
        name: str = "rmse",
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(name, output_names, label_names)

    @staticmethod
    def _batch_value(diff: Any, xp: Any) -> Any:
        return xp.sqrt((diff * diff).mean())


class _Moments:
    """Streaming count, means, second moments and co-moment of two series (Chan et al.)."""

    def __init__(self) -> None:
        self.n = 0
        self.mean_l = self.mean_p = 0.0
        self.m2_l = self.m2_p = self.co = 0.0

    def add(self, lab: numpy.ndarray, prd: numpy.ndarray) -> None:
        m = lab.size
        if m == 0:
            return
        mean_l, mean_p = lab.mean(), prd.mean()
        dl, dp = lab - mean_l, prd - mean_p
        n = self.n
        total = n + m
        delta_l, delta_p = mean_l - self.mean_l, mean_p - self.mean_p
        weight = n * m / total
        self.m2_l += float((dl * dl).sum()) + delta_l * delta_l * weight
        self.m2_p += float((dp * dp).sum()) + delta_p * delta_p * weight
        self.co += float((dl * dp).sum()) + delta_l * delta_p * weight
        self.mean_l += delta_l * m / total
        self.mean_p += delta_p * m / total
        self.n = total

    def pearson(self) -> float:
        denom = numpy.sqrt(self.m2_l * self.m2_p)
        return float(self.co / denom) if denom else float("nan")


@register(aliases=("pearsonr",))
class PearsonCorrelation(EvalMetric):
    """Pearson correlation of flattened predictions and labels.

    ``average='macro'`` averages per-batch correlations; ``'micro'`` streams the moments
    and gives the correlation over everything seen (local since ``reset_local``, global
    since ``reset``).

    >>> from engine import nd
    >>> m = PearsonCorrelation()
    >>> label = nd.array([[1, 0], [0, 1], [0, 1]])
    >>> m.update([label], [nd.array([[0.3, 0.7], [0, 1.], [0.4, 0.6]])])
    >>> round(m.get()[1], 6)
    0.421637
    """

    def __init__(
        self,
        name: str = "pearsonr",
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
        average: str = "macro",
    ) -> None:
        if average not in ("macro", "micro"):
            raise ValueError(f"average must be 'macro' or 'micro', got {average!r}")
        self.average = average
        super().__init__(
            name, output_names=output_names, label_names=label_names, average=average,
            has_global_stats=True,
        )

    def reset(self) -> None:
        super().reset()
        self._local, self._global = _Moments(), _Moments()

    def reset_local(self) -> None:
        super().reset_local()
        self._local = _Moments()

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, wrap=True)
        for label, pred in zip(labels, preds, strict=True):
            check_label_shapes(label, pred, shape=True)
            lab, prd = same_device(label, pred)
            xp = array_module(prd)
            lab = lab.ravel().astype(numpy.float64)
            prd = prd.ravel().astype(numpy.float64)
            if self.average == "macro":
                self._add(xp.corrcoef(prd, lab)[0, 1], 1)
            else:
                lab_h, prd_h = to_numpy(lab), to_numpy(prd)
                self._local.add(lab_h, prd_h)
                self._global.add(lab_h, prd_h)
                self._add(0.0, 1)

    def get(self) -> tuple[str, float]:
        if self.num_inst == 0:
            return self.name, float("nan")
        if self.average == "macro":
            return self.name, float(self.sum_metric / self.num_inst)
        return self.name, self._local.pearson()

    def get_global(self) -> tuple[str, float]:
        if self.global_num_inst == 0:
            return self.name, float("nan")
        if self.average == "macro":
            return self.name, float(self.global_sum_metric / self.global_num_inst)
        return self.name, self._global.pearson()
