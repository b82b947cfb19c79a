"""Array helpers shared by the metrics: raw device arrays, label/prediction pairing."""

from __future__ import annotations

from typing import Any

import numpy

from ..backend import array_module, to_numpy


def raw(x: Any) -> Any:
    """The numpy/cupy array behind an NDArray (or a plain array / list)."""
    data = getattr(x, "_data", None)
    if data is not None:
        return data
    if isinstance(x, (list, tuple, int, float)):
        return numpy.asarray(x)
    return x


def same_device(label: Any, pred: Any) -> tuple[Any, Any]:
    """Raw ``(label, pred)`` on the prediction's device (labels often stay on the host)."""
    lab, prd = raw(label), raw(pred)
    xp = array_module(prd)
    if array_module(lab) is not xp:
        lab = xp.asarray(to_numpy(lab)) if xp is not numpy else to_numpy(lab)
    return lab, prd


def host(value: Any) -> Any:
    """A Python number from a 0-d device array (the one place a metric synchronises)."""
    if hasattr(value, "item") and not isinstance(value, (int, float)):
        return value.item()
    return value


def check_label_shapes(labels: Any, preds: Any, wrap: bool = False, shape: bool = False):
    """Check that labels and predictions pair up; ``wrap`` turns single arrays into lists."""
    if not shape:
        if wrap:
            labels, preds = _as_list(labels), _as_list(preds)
        label_shape, pred_shape = len(labels), len(preds)
    else:
        label_shape, pred_shape = raw(labels).shape, raw(preds).shape
    if label_shape != pred_shape:
        raise ValueError(
            f"Shape of labels {label_shape} does not match shape of predictions {pred_shape}"
        )
    return labels, preds


def _as_list(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]
