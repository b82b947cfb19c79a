"""The symbolic loss heads: ``SoftmaxOutput`` and the regression outputs.

Each is one recorded op whose backward is MXNet's fused gradient and ignores the head
gradient, as MXNet's loss layers do: a graph ending in them is differentiated with
``backward()`` and no ``out_grads``.
"""

from __future__ import annotations

from typing import Any

import numpy

from ..ndarray import NDArray, apply_op
from ..ndarray.ndarray import as_raw
from .ops import OpSpec, Shape, _bool, _op, _prod


def _softmax_label_infer(p: dict[str, Any], shapes: list[Shape | None]):
    data = shapes[0]
    if data is None:
        return shapes, None
    if p["multi_output"]:
        label = (data[0],) + tuple(data[2:])
    elif p["preserve_shape"]:
        label = tuple(data[:-1])
    else:
        label = (data[0],)
    if shapes[1] is not None and _prod(shapes[1]) == _prod(data):
        label = shapes[1]  # probability labels of the data's size
    return [data, label], data


def softmax_output(data: NDArray, label: Any, grad_scale: float = 1.0,
                   ignore_label: float = -1.0, multi_output: bool = False,
                   use_ignore: bool = False, preserve_shape: bool = False,
                   normalization: str = "null", smooth_alpha: float = 0.0,
                   **_: Any) -> NDArray:
    """Softmax forward; backward ``(softmax - onehot(label)) * grad_scale`` (normalized
    by nothing, the batch or the valid count), whatever the head gradient."""
    if normalization not in ("null", "batch", "valid"):
        raise ValueError(f"normalization must be 'null', 'batch' or 'valid', got "
                         f"{normalization!r}")
    x = data.raw
    xp = data.xp
    if multi_output:
        axis, work = 1, x
    elif preserve_shape:
        axis, work = x.ndim - 1, x
    else:
        axis, work = 1, x.reshape(x.shape[0], -1)
    z = work - work.max(axis=axis, keepdims=True)
    e = xp.exp(z)
    prob = e / e.sum(axis=axis, keepdims=True)
    lab_raw = as_raw(label, data)
    classes = work.shape[axis]

    def backward(_g: Any) -> tuple[Any]:
        grad = prob.copy()
        if lab_raw.size == prob.size:  # a probability target of the data's shape
            return (((grad - lab_raw.reshape(work.shape)) * grad_scale)
                    .astype(x.dtype, copy=False).reshape(x.shape),)
        lab = lab_raw.astype(numpy.int64).reshape(work.shape[:axis] + work.shape[axis + 1:])
        valid = (lab != int(ignore_label)) if use_ignore else None
        safe = xp.where(valid, lab, 0) if valid is not None else xp.clip(lab, 0, classes - 1)
        if smooth_alpha:  # target: 1 - a on the label, a / (K - 1) elsewhere
            off = smooth_alpha / (classes - 1)
            grad -= off
            hit = 1.0 - smooth_alpha - off
        else:
            hit = 1.0
        if grad.ndim == 2:
            grad[xp.arange(grad.shape[0]), safe] -= hit
        else:  # (N, K, ...) with classes on axis 1: subtract a one-hot mask
            shape = [1] * grad.ndim
            shape[axis] = classes
            onehot = xp.expand_dims(safe, axis) == xp.arange(classes).reshape(shape)
            grad -= hit * onehot
        scale = grad_scale
        if valid is not None:
            grad *= xp.expand_dims(valid, axis)
        if normalization == "batch":
            scale = scale / x.shape[0]
        elif normalization == "valid":
            count = int(valid.sum()) if valid is not None else lab.size
            scale = scale / max(count, 1)
        return ((grad * scale).astype(x.dtype, copy=False).reshape(x.shape),)

    return apply_op(prob.astype(x.dtype, copy=False).reshape(x.shape), (data,), backward)


_SOFTMAX_PARAMS = {
    "grad_scale": (float, 1.0), "ignore_label": (float, -1.0), "multi_output": (_bool, False),
    "use_ignore": (_bool, False), "preserve_shape": (_bool, False),
    "normalization": (str, "null"), "out_grad": (_bool, False), "smooth_alpha": (float, 0.0),
}
_op(OpSpec("SoftmaxOutput", ("data", "label"), _SOFTMAX_PARAMS, _softmax_label_infer,
           lambda p, x: softmax_output(x[0], x[1], **p)))


def _regression_infer(p: dict[str, Any], shapes: list[Shape | None]):
    data = shapes[0]
    if data is None:
        return shapes, None
    label = shapes[1] if shapes[1] is not None and _prod(shapes[1]) == _prod(data) else data
    return [data, label], data


def regression_output(kind: str, data: NDArray, label: Any, grad_scale: float = 1.0) -> NDArray:
    """MXNet's regression heads: forward identity (logistic: sigmoid); backward
    ``(out - label)`` (MAE: its sign) ``* grad_scale / outputs_per_sample``."""
    x = data.raw
    xp = data.xp
    out = 1.0 / (1.0 + xp.exp(-x)) if kind == "logistic" else x
    lab_raw = as_raw(label, data)
    per_sample = max(1, x.size // x.shape[0]) if x.ndim else 1

    def backward(_g: Any) -> tuple[Any]:
        diff = out - lab_raw.reshape(out.shape)
        if kind == "mae":
            diff = xp.sign(diff)
        return ((diff * (grad_scale / per_sample)).astype(x.dtype, copy=False),)

    return apply_op(out.astype(x.dtype, copy=False), (data,), backward)


for _name, _kind in (("LinearRegressionOutput", "linear"),
                     ("LogisticRegressionOutput", "logistic"),
                     ("MAERegressionOutput", "mae")):
    _op(OpSpec(_name, ("data", "label"), {"grad_scale": (float, 1.0)}, _regression_infer,
               lambda p, x, _k=_kind: regression_output(_k, x[0], x[1], p["grad_scale"])))


def svm_output(data: NDArray, label: Any, margin: float = 1.0,
               regularization_coefficient: float = 1.0, use_linear: bool = False) -> NDArray:
    """MXNet's ``SVMOutput``: forward identity; backward the hinge loss's gradient per
    class (squared hinge unless ``use_linear``), scaled by the regularization coefficient,
    whatever the head gradient."""
    x = data.raw
    xp = data.xp
    scores = x.reshape(x.shape[0], -1)
    classes = as_raw(label, data).reshape(-1).astype("int64")
    is_label = xp.arange(scores.shape[1])[None, :] == classes[:, None]
    # the labelled class should score above +margin, every other class below -margin
    signed = xp.where(is_label, scores, -scores)
    active = margin > signed
    sign = xp.where(is_label, -1.0, 1.0)

    def backward(_g: Any) -> tuple[Any]:
        if use_linear:
            grad = active * sign
        else:
            grad = xp.where(active, 2 * (margin - signed), 0.0) * sign
        grad = grad * regularization_coefficient
        return (grad.astype(x.dtype, copy=False).reshape(x.shape),)

    return apply_op(x.copy(), (data,), backward)


def _svm_infer(p: dict[str, Any], shapes: list[Shape | None]):
    data = shapes[0]
    return ([data, (data[0],)], data) if data is not None else (shapes, None)


_op(OpSpec("SVMOutput", ("data", "label"),
           {"margin": (float, 1.0), "regularization_coefficient": (float, 1.0),
            "use_linear": (_bool, False)},
           _svm_infer, lambda p, x: svm_output(x[0], x[1], **p)))
