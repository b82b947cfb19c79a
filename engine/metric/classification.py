"""Classification metrics: Accuracy, TopKAccuracy, F1, MCC and PCC (MXNet 1.9 numerics).

All statistics are computed with the arrays' own module (numpy or cupy) in whole-batch
operations; F1/MCC/PCC bring only a handful of counts to the host per update.

>>> from engine import metric, nd
>>> f1 = metric.F1()
>>> f1.update([nd.array([1, 0, 1])], [nd.array([[0.1, 0.9], [0.3, 0.7], [0.8, 0.2]])])
>>> f1.get()
('f1', 0.5)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy

from ..backend import array_module, to_numpy
from .arrays import check_label_shapes, host, same_device
from .base import EvalMetric, register


@register(aliases=("acc",))
class Accuracy(EvalMetric):
    """Fraction of predictions equal to the label; class scores are argmax-ed over ``axis``.

    >>> from engine import nd
    >>> m = Accuracy(); m.update([nd.array([0, 1])], [nd.array([[0.9, 0.1], [0.8, 0.2]])])
    >>> m.get()
    ('accuracy', 0.5)
    """

    def __init__(
        self,
        axis: int = 1,
        name: str = "accuracy",
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(
            name, axis=axis, output_names=output_names, label_names=label_names,
            has_global_stats=True,
        )
        self.axis = axis

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, wrap=True)
        for label, pred in zip(labels, preds, strict=True):
            lab, prd = same_device(label, pred)
            if prd.shape != lab.shape:
                prd = prd.argmax(axis=self.axis)
            prd = prd.astype(numpy.int32, copy=False).ravel()
            lab = lab.astype(numpy.int32, copy=False).ravel()
            check_label_shapes(lab, prd)
            self._add((prd == lab).sum(), prd.size)


@register(aliases=("top_k_accuracy", "top_k_acc"))
class TopKAccuracy(EvalMetric):
    """Fraction of samples whose label is among the ``top_k`` highest scores.

    Unlike MXNet 1.x, 1-D predictions also count towards the global statistics.

    >>> from engine import nd
    >>> m = TopKAccuracy(top_k=2)
    >>> m.update([nd.array([2, 0])], [nd.array([[0.1, 0.5, 0.4], [0.2, 0.3, 0.5]])])
    >>> m.get()
    ('top_k_accuracy_2', 0.5)
    """

    def __init__(
        self,
        top_k: int = 1,
        name: str = "top_k_accuracy",
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(
            name, top_k=top_k, output_names=output_names, label_names=label_names,
            has_global_stats=True,
        )
        self.top_k = top_k
        if not self.top_k > 1:
            raise ValueError("Please use Accuracy if top_k is no more than 1")
        suffix = f"_{self.top_k}"
        if not self.name.endswith(suffix):  # a name from get_config() already has it
            self.name += suffix

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, wrap=True)
        for label, pred in zip(labels, preds, strict=True):
            lab, prd = same_device(label, pred)
            if prd.ndim > 2:
                raise ValueError(f"Predictions should be no more than 2 dims, got {prd.shape}")
            xp = array_module(prd)
            lab = lab.astype(numpy.int32, copy=False)
            order = xp.argpartition(prd.astype(numpy.float32, copy=False), -self.top_k, axis=-1)
            check_label_shapes(lab, order)
            if prd.ndim == 1:
                # MXNet's semantics for a 1-D prediction: compare indices position by position.
                correct = (order.ravel() == lab.ravel()).sum()
            else:
                k = min(prd.shape[1], self.top_k)
                top = order[:, prd.shape[1] - k:]
                correct = (top == lab.reshape(-1, 1)).any(axis=1).sum()
            self._add(correct, prd.shape[0])


class _BinaryCounts:
    """Confusion counts of a binary classifier, local and global."""

    def __init__(self) -> None:
        self.reset_stats()

    def update(self, label: Any, pred: Any) -> None:
        lab, prd = same_device(label, pred)
        xp = array_module(prd)
        lab = lab.astype(numpy.int32, copy=False).ravel()
        if len(lab) != len(prd):
            raise ValueError(
                f"Shape of labels {len(lab)} does not match shape of predictions {len(prd)}"
            )
        if int(xp.unique(lab).size) > 2:
            raise ValueError("F1 and MCC only support binary classification (2 classes)")
        pred_pos = prd.argmax(axis=1) == 1
        label_pos = lab == 1
        counts = xp.stack([
            (pred_pos & label_pos).sum(), (pred_pos & ~label_pos).sum(),
            (~pred_pos & label_pos).sum(), (~pred_pos & ~label_pos).sum(),
        ])
        tp, fp, fn, tn = (int(c) for c in to_numpy(counts))
        self.local = [a + b for a, b in zip(self.local, (tp, fp, fn, tn), strict=True)]
        self.glob = [a + b for a, b in zip(self.glob, (tp, fp, fn, tn), strict=True)]

    def reset_local(self) -> None:
        self.local = [0, 0, 0, 0]

    def reset_stats(self) -> None:
        self.local = [0, 0, 0, 0]
        self.glob = [0, 0, 0, 0]

    @staticmethod
    def fscore(counts: list[int]) -> float:
        tp, fp, fn, _ = counts
        precision = tp / (tp + fp) if tp + fp > 0 else 0.0
        recall = tp / (tp + fn) if tp + fn > 0 else 0.0
        if precision + recall > 0:
            return 2 * precision * recall / (precision + recall)
        return 0.0

    @staticmethod
    def matthewscc(counts: list[int]) -> float:
        tp, fp, fn, tn = (float(c) for c in counts)
        if not tp + fp + fn + tn:
            return 0.0
        denom = 1.0
        for term in (tp + fp, tp + fn, tn + fp, tn + fn):
            if term != 0.0:  # MXNet leaves zero factors out rather than return NaN
                denom *= term
        return (tp * tn - fp * fn) / math.sqrt(denom)


class _BinaryMetric(EvalMetric):
    """F1 and MCC: 'macro' averages per-update scores, 'micro' scores the pooled counts."""

    _score: Any = None

    def __init__(self, name: str, output_names: Any, label_names: Any, average: str) -> None:
        if average not in ("macro", "micro"):
            raise ValueError(f"average must be 'macro' or 'micro', got {average!r}")
        self.average = average
        self._counts = _BinaryCounts()
        super().__init__(
            name, output_names=output_names, label_names=label_names, average=average,
            has_global_stats=True,
        )

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, wrap=True)
        for label, pred in zip(labels, preds, strict=True):
            self._counts.update(label, pred)
        score = type(self)._score
        local, glob = self._counts.local, self._counts.glob
        if self.average == "macro":
            self._add(score(local), 1)
            self._counts.reset_stats()
        else:
            self._sum_metric = score(local) * sum(local)
            self._global_sum_metric = score(glob) * sum(glob)
            self._num_inst = sum(local)
            self._global_num_inst = sum(glob)

    def reset(self) -> None:
        super().reset()
        self._counts.reset_stats()

    def reset_local(self) -> None:
        super().reset_local()
        self._counts.reset_local()


@register
class F1(_BinaryMetric):
    """Binary F1 score of ``argmax(pred)`` against labels in {0, 1}.

    ``average='macro'`` averages the F1 of each update; ``'micro'`` computes F1 over all
    examples (``num_inst`` counts examples).
    """

    _score = staticmethod(_BinaryCounts.fscore)

    def __init__(
        self,
        name: str = "f1",
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
        average: str = "macro",
    ) -> None:
        super().__init__(name, output_names, label_names, average)


@register
class MCC(_BinaryMetric):
    """Binary Matthews correlation coefficient of ``argmax(pred)`` against {0, 1} labels."""

    _score = staticmethod(_BinaryCounts.matthewscc)

    def __init__(
        self,
        name: str = "mcc",
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
        average: str = "macro",
    ) -> None:
        super().__init__(name, output_names, label_names, average)


@register
class PCC(EvalMetric):
    """Multiclass Pearson correlation from a confusion matrix (equals MCC on two classes)."""

    def __init__(
        self,
        name: str = "pcc",
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
        has_global_stats: bool = True,
    ) -> None:
        self.k = 2
        super().__init__(
            name, output_names=output_names, label_names=label_names,
            has_global_stats=has_global_stats,
        )

    def _grow(self, k: int) -> None:
        inc = k - self.k
        self.lcm = numpy.pad(self.lcm, ((0, inc), (0, inc)))
        self.gcm = numpy.pad(self.gcm, ((0, inc), (0, inc)))
        self.k = k

    @staticmethod
    def _mcc(cmat: numpy.ndarray) -> float:
        n = cmat.sum()
        x = cmat.sum(axis=1)
        y = cmat.sum(axis=0)
        cov_xx = numpy.sum(x * (n - x))
        cov_yy = numpy.sum(y * (n - y))
        if cov_xx == 0 or cov_yy == 0:
            return float("nan")
        cov_xy = numpy.sum(cmat.diagonal() * n - x * y)
        return float(cov_xy / (cov_xx * cov_yy) ** 0.5)

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, wrap=True)
        for label, pred in zip(labels, preds, strict=True):
            lab, prd = same_device(label, pred)
            xp = array_module(prd)
            lab = lab.astype(numpy.int64, copy=False).ravel()
            prd = prd.argmax(axis=1) if prd.shape != raw_shape(label) else prd
            prd = prd.astype(numpy.int64, copy=False).ravel()
            k = max(int(prd.max()), int(lab.max())) + 1 if lab.size else 0
            if k > self.k:
                self._grow(k)
            counts = xp.bincount(prd * self.k + lab, minlength=self.k * self.k)
            batch = to_numpy(counts).reshape(self.k, self.k).astype(numpy.float64)
            self.lcm += batch
            self.gcm += batch
        self._num_inst += 1
        self._global_num_inst += 1

    @property  # type: ignore[override]
    def sum_metric(self) -> float:
        return self._mcc(self.lcm) * host(self._num_inst)

    @property  # type: ignore[override]
    def global_sum_metric(self) -> float:
        return self._mcc(self.gcm) * host(self._global_num_inst)

    def reset(self) -> None:
        self._global_num_inst = 0
        self.gcm = numpy.zeros((self.k, self.k))
        self.reset_local()

    def reset_local(self) -> None:
        self._num_inst = 0
        self.lcm = numpy.zeros((self.k, self.k))


def raw_shape(x: Any) -> tuple[int, ...]:
    return tuple(getattr(x, "shape", numpy.shape(x)))
